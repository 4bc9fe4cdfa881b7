"""A team's agent notes (a runbook, an ADR, a note) and questions over them: the library
the PostgreSQL store's tests add to both engines and compare (``test_postgres_library``,
``test_postgres_hybrid``). Each document: ``(title, content, source_uri, tags)``."""

from __future__ import annotations

DOCUMENTS = (
    (
        "Deploy runbook",
        "# Deploy\n\n## Restart\n\nRestart the gateway with `systemctl restart gw`.\n"
        "Then check the health endpoint answers 200.\n\n## Rollback\n\n"
        "Roll back by deploying the previous tag; the gateway keeps its sessions.\n",
        "agent://runbooks/deploy",
        ["ops"],
    ),
    (
        "ADR 7: sessions in Redis",
        "# ADR 7\n\nSessions live in Redis so a gateway restart keeps them.\n"
        "We rejected sticky sessions: a restart dropped every user.\n",
        "agent://adr/7",
        ["adr"],
    ),
    (
        "Health checks",
        "# Health\n\nEvery service answers /healthz; the gateway's health endpoint "
        "also checks Redis.\n",
        "agent://notes/health",
        [],
    ),
)
QUESTIONS = ("restart the gateway", "health endpoint redis", "sticky sessions rollback")
