"""User lookups for the accounts service."""

from dataclasses import dataclass


@dataclass
class User:
    id: int
    email: str


def getUserById(users: dict[int, User], user_id: int) -> User | None:
    """Return the user with this id, or None."""
    return users.get(user_id)


def normalize_email(email: str) -> str:
    """Lower-case the address and strip spaces, so lookups by email match."""
    return email.strip().lower()
