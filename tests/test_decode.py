"""decode_bytes: BOMs, BOM-less UTF-16, legacy fallbacks, line ends, binary rejection."""

from __future__ import annotations

import codecs

import pytest

from kb_mcp.errors import Unreadable
from kb_mcp.ingest.decode import decode_bytes

TEXT = "Grüße, naïve café — “quoted” 日本語\nsecond line\n"


def test_decode_bytes_reads_plain_utf8() -> None:
    assert decode_bytes(TEXT.encode("utf-8")) == TEXT


def test_decode_bytes_strips_utf8_bom() -> None:
    assert decode_bytes(codecs.BOM_UTF8 + TEXT.encode("utf-8")) == TEXT


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_decode_bytes_follows_bom(bom: bytes, encoding: str) -> None:
    assert decode_bytes(bom + TEXT.encode(encoding)) == TEXT


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_decode_bytes_detects_utf16_without_bom_by_nul_positions(encoding: str) -> None:
    text = "def main():\n    print('hello')\n"
    assert decode_bytes(text.encode(encoding)) == text


def test_decode_bytes_falls_back_to_cp1252() -> None:
    text = "café – “smart quotes” €5"
    assert decode_bytes(text.encode("cp1252")) == text


def test_decode_bytes_reads_bytes_undefined_in_cp1252_as_latin1() -> None:
    assert decode_bytes(b"\x93caf\xe9\x94 \x81") == "“café” \x81"


def test_decode_bytes_uses_declared_encoding_when_utf8_fails() -> None:
    text = "日本語のテキスト"
    assert decode_bytes(text.encode("shift_jis"), declared="shift_jis") == text


def test_decode_bytes_prefers_utf8_over_a_stale_declaration() -> None:
    assert decode_bytes("café".encode(), declared="iso-8859-1") == "café"


def test_decode_bytes_ignores_unknown_declared_encoding() -> None:
    assert decode_bytes("café".encode("cp1252"), declared="no-such-codec") == "café"


def test_decode_bytes_turns_crlf_and_cr_into_lf_keeping_line_count() -> None:
    data = b"one\r\ntwo\rthree\nfour"
    text = decode_bytes(data)
    assert text == "one\ntwo\nthree\nfour"
    assert len(text.split("\n")) == len(data.decode().splitlines())


def test_decode_bytes_keeps_tabs_form_feeds_and_escapes() -> None:
    text = "a\tb\x0cc\x1b[31mred\x1b[0m\n"
    assert decode_bytes(text.encode()) == text


def test_decode_bytes_accepts_empty_input() -> None:
    assert decode_bytes(b"") == ""


def test_decode_bytes_rejects_nul_bytes_outside_utf16() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x06"
    with pytest.raises(Unreadable, match=r"binary data \(NUL byte at offset 8\)"):
        decode_bytes(png)


def test_decode_bytes_rejects_control_heavy_data() -> None:
    data = bytes(range(1, 32)) * 20 + b"some text"
    with pytest.raises(Unreadable, match=r"binary data \(\d+% control characters\)"):
        decode_bytes(data)


# --- legacy East Asian encodings (issue 7 item 14) ------------------------------------------

_ZH_HANS = (
    "知识库把你的笔记、文档和代码放在一个本地数据库里。代理提问时，它返回带有出处的确切段落。"
    "所有数据都保存在用户自己的电脑上，不需要服务器，也不需要联网。关键词搜索和正则表达式搜索"
    "无需任何配置即可使用；如果有嵌入模型，还可以进行向量搜索。\n"
    "同步文件夹时，程序只读取有变化的文件，并且会跳过版本控制目录和依赖目录。一个文件读取失败，"
    "只会记录这个文件的原因，其余文件照常同步。重新建立索引不会丢失任何文档，因为文件才是真相。\n"
)
_ZH_HANT = (
    "知識庫把你的筆記、文件和程式碼放在一個本機資料庫裡。代理提問時，它會回傳附有出處的確切段落。"
    "所有資料都保存在使用者自己的電腦上，不需要伺服器，也不需要連網。關鍵字搜尋與正規表示式搜尋"
    "無需任何設定即可使用；如果有嵌入模型，還可以進行向量搜尋。\n"
    "同步資料夾時，程式只讀取有變化的檔案，並且會略過版本控制目錄與相依套件目錄。一個檔案讀取失敗，"
    "只會記錄該檔案的原因，其餘檔案照常同步。重建索引不會遺失任何文件，因為檔案才是真相。\n"
)
_JA = (
    "ナレッジベースは、メモや文書、ソースコードを一つのローカルデータベースにまとめます。"
    "エージェントが質問すると、出典付きの正確な段落を返します。すべてのデータは利用者自身の"
    "コンピューターに保存され、サーバーもネットワーク接続も必要ありません。\n"
    "フォルダーを同期するときは、変更されたファイルだけを読み直し、バージョン管理や依存関係の"
    "フォルダーは飛ばします。一つのファイルの読み込みに失敗しても、その理由を記録するだけで、"
    "残りのファイルはいつも通り同期されます。索引を作り直しても文書は失われません。\n"
)
_KO = (
    "지식 베이스는 메모와 문서, 소스 코드를 하나의 로컬 데이터베이스에 모아 둡니다. 에이전트가 "
    "질문하면 출처가 붙은 정확한 문단을 돌려줍니다. 모든 데이터는 사용자의 컴퓨터에 저장되며 "
    "서버나 네트워크 연결이 필요하지 않습니다.\n"
    "폴더를 동기화할 때는 바뀐 파일만 다시 읽고, 버전 관리 폴더와 의존성 폴더는 건너뜁니다. "
    "파일 하나를 읽지 못해도 그 이유만 기록하고 나머지 파일은 평소처럼 동기화합니다. 색인을 "
    "다시 만들어도 문서는 사라지지 않습니다. 파일이 곧 진실이기 때문입니다.\n"
)
_SHORT = {
    "gbk": "同步文件夹时，程序只读取有变化的文件，其余照常。",
    "big5": "同步資料夾時，程式只讀取有變化的檔案，其餘照常。",
    "shift_jis": "同期のときは、変更されたファイルだけを読み直します。",
    "euc_kr": "폴더를 동기화할 때는 바뀐 파일만 다시 읽습니다.",
}


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        pytest.param("gbk", _ZH_HANS, id="gbk-simplified"),
        pytest.param("gb18030", _ZH_HANS, id="gb18030-simplified"),
        pytest.param("big5", _ZH_HANT, id="big5-traditional"),
        pytest.param("shift_jis", _JA, id="shift_jis-japanese"),
        pytest.param("euc_kr", _KO, id="euc_kr-korean"),
        *(pytest.param(enc, text, id=f"{enc}-short") for enc, text in _SHORT.items()),
        pytest.param("gbk", f"# 配置说明\n\nport = 8080  # {_SHORT['gbk']}\n", id="gbk-in-code"),
    ],
)
def test_decode_bytes_reads_legacy_cjk_encodings(encoding: str, text: str) -> None:
    """issue 7 item 14: GBK, Big5, Shift-JIS and EUC-KR decoded, not read as cp1252."""
    assert len(text) >= 20
    assert decode_bytes(text.encode(encoding)) == text


@pytest.mark.parametrize(
    "text",
    [
        "Café “quoted” — naïve résumé, 12 €.\n",
        "Temperature 20°C ± 2°, 50¢ a cup.\n",
        "Größe über Straße; Ærø and Ñandú.\n",
        "niño\n",
        "Le système a été mis à jour ; voilà, c’est fait.\n" * 20,
    ],
)
def test_decode_bytes_keeps_western_cp1252_text(text: str) -> None:
    """issue 7 item 14: the CJK step never takes Western cp1252 text (é, “quotes”, °, ±)."""
    assert decode_bytes(text.encode("cp1252")) == text
