"""The word lists of kb-mcp, as data: the words of time in each language the library
reads, and the function words a question's match leaves out.

One table per concept, one row per language: adding a language is adding rows here,
never a regex elsewhere (``text/dates.py`` builds its patterns from these tables). The
languages: English, German, French, Spanish, Italian, Portuguese, Dutch, Chinese,
Japanese, Korean. Latin-script words are written with their accents; ``text/dates``
also accepts them without (``März`` / ``Marz``, ``février`` / ``fevrier``).

Left out on purpose: abbreviations that are common words of another language here
(Portuguese ``set`` and ``out``, Spanish and Italian ``ago``), which would turn "set 5"
or "2 ago" into dates.
"""

from __future__ import annotations

# Month names, January first: each cell lists a month's full name and its abbreviations.
MONTHS: dict[str, tuple[str, ...]] = {
    "en": (
        "january jan",
        "february feb",
        "march mar",
        "april apr",
        "may",
        "june jun",
        "july jul",
        "august aug",
        "september sep sept",
        "october oct",
        "november nov",
        "december dec",
    ),
    "de": (
        "januar jänner jan",
        "februar feber feb",
        "märz mär mrz",
        "april apr",
        "mai",
        "juni jun",
        "juli jul",
        "august aug",
        "september sep sept",
        "oktober okt",
        "november nov",
        "dezember dez",
    ),
    "fr": (
        "janvier janv",
        "février févr fév",
        "mars",
        "avril avr",
        "mai",
        "juin",
        "juillet juil",
        "août",
        "septembre sept",
        "octobre oct",
        "novembre nov",
        "décembre déc",
    ),
    "es": (
        "enero ene",
        "febrero feb",
        "marzo mar",
        "abril abr",
        "mayo may",
        "junio jun",
        "julio jul",
        "agosto",
        "septiembre setiembre sep sept",
        "octubre oct",
        "noviembre nov",
        "diciembre dic",
    ),
    "it": (
        "gennaio gen",
        "febbraio feb",
        "marzo mar",
        "aprile apr",
        "maggio mag",
        "giugno giu",
        "luglio lug",
        "agosto",
        "settembre sett",
        "ottobre ott",
        "novembre nov",
        "dicembre dic",
    ),
    "pt": (
        "janeiro jan",
        "fevereiro fev",
        "março mar",
        "abril abr",
        "maio mai",
        "junho jun",
        "julho jul",
        "agosto",
        "setembro",
        "outubro",
        "novembro nov",
        "dezembro dez",
    ),
    "nl": (
        "januari jan",
        "februari feb",
        "maart mrt",
        "april apr",
        "mei",
        "juni jun",
        "juli jul",
        "augustus aug",
        "september sep sept",
        "oktober okt",
        "november nov",
        "december dec",
    ),
}

# Seasons: the month a season is taken to name (a question "in summer 2025" asks about
# mid-July; the northern year, as the English rule always read it).
SEASONS: dict[str, int] = {
    **dict.fromkeys(("spring", "frühling", "frühjahr", "printemps", "primavera", "lente"), 4),
    **dict.fromkeys(("summer", "sommer", "été", "verano", "estate", "verão", "zomer"), 7),
    **dict.fromkeys(("autumn", "fall", "herbst", "automne", "otoño", "autunno", "outono"), 10),
    **dict.fromkeys(("herfst",), 10),
    **dict.fromkeys(("winter", "hiver", "invierno", "inverno"), 1),
}

# A year's part named by a word before it ("mid-2022", "Anfang 2024"): its months.
YEAR_PARTS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("early", "anfang", "début", "principios de", "inizio", "begin"), (1, 3)),
    **dict.fromkeys(("mid", "mitte", "mi", "mediados de", "metà", "meados de", "medio"), (6, 6)),
    **dict.fromkeys(("late", "finales de", "final de"), (9, 10)),
    **dict.fromkeys(("end of", "ende", "fin", "fin de", "fine", "fim de", "eind"), (12, 12)),
}

# "the first half of 2025", "erstes Halbjahr 2025": which half (1 or 2).
HALF_PHRASES: dict[str, int] = {
    **dict.fromkeys(("first half of", "erstes halbjahr", "1. halbjahr", "premier semestre"), 1),
    **dict.fromkeys(("primer semestre", "primo semestre", "primeiro semestre"), 1),
    **dict.fromkeys(("eerste helft van", "eerste halfjaar"), 1),
    **dict.fromkeys(("second half of", "zweites halbjahr", "2. halbjahr", "second semestre"), 2),
    **dict.fromkeys(("segundo semestre", "secondo semestre", "tweede helft van"), 2),
    **dict.fromkeys(("tweede halfjaar",), 2),
}
# "3rd quarter of 2024", "3. Quartal 2024", "3e trimestre 2024", "3e kwartaal 2024".
QUARTER_WORDS = ("quarter", "quartal", "trimestre", "kwartaal")

# Chinese, Japanese and Korean: the marks after a year, a month and a day, and the words
# for a year's quarter and halves.
CJK_YEAR = "年년"
CJK_MONTH = "月월"
CJK_DAY = "日일号號"
CJK_NUMERALS = {"一": 1, "二": 2, "三": 3, "四": 4, "1": 1, "2": 2, "3": 3, "4": 4}
CJK_QUARTER = ("四半期", "季度", "分期", "분기", "季")
CJK_HALVES: dict[str, int] = {
    **dict.fromkeys(("上半期", "上半年", "上期", "상반기"), 1),
    **dict.fromkeys(("下半期", "下半年", "下期", "하반기"), 2),
}
# Japanese eras: the Gregorian year before an era's first (令和1年 = 2019); 元 is year 1.
JAPANESE_ERAS: dict[str, int] = {"令和": 2018, "平成": 1988, "昭和": 1925}

# Between a day and its month or year: "14 de marzo de 2025", "the 3rd of March".
CONNECTORS = ("de", "del", "of")
# Ordinal marks after a day: "14th", "1er", "14.", "1º".
ORDINALS = ("st", "nd", "rd", "th", "er", "e", "º", "°", ".")
# Articles a lead may have before its date: "before the April 2025 change".
ARTICLES = ("the", "der", "dem", "den", "le", "la", "l'", "el", "il", "lo", "o", "a", "het")

# The label of a line that dates its document: "Posted 12 March 2026", "Stand: 14.03.2025",
# "发布日期：2025年3月14日", "更新日: 2025年3月14日".
DOCUMENT_DATE_LABELS = (
    # English
    "posted",
    "published",
    "added",
    "written",
    "dated",
    "date",
    "last updated",
    "updated",
    "update",
    "effective from",
    "effective on",
    "effective",
    "valid from",
    "in force from",
    # German
    "stand",
    "datum",
    "veröffentlicht",
    "aktualisiert",
    "zuletzt aktualisiert",
    "erstellt",
    "gültig ab",
    "gilt ab",
    # French
    "publié",
    "mis à jour",
    "mise à jour",
    "en vigueur",
    # Spanish, Portuguese, Italian
    "fecha",
    "data",
    "publicado",
    "actualizado",
    "atualizado",
    "pubblicato",
    "aggiornato",
    "vigente desde",
    # Dutch
    "gepubliceerd",
    "bijgewerkt",
    "geldig vanaf",
    # Chinese, Japanese, Korean
    "日期",
    "日付",
    "发布日期",
    "發布日期",
    "发布时间",
    "发布于",
    "更新日期",
    "更新时间",
    "更新于",
    "生效日期",
    "更新日",
    "作成日",
    "公開日",
    "発行日",
    "施行日",
    "改定日",
    "작성일",
    "게시일",
    "수정일",
    "시행일",
)
# Words between a label and its date: "Posted on", "Veröffentlicht am", "publié le".
LABEL_LINKS = ("on", "am", "vom", "le", "du", "el", "em", "il", "op", "于", "於")

# A word stating the date something takes effect or was done, before the date
# ("effective 3 February", "gilt ab 1. März", "à compter du 1er mars", "自2025年3月1日").
DATE_CUES_BEFORE = (
    "effective from",
    "effective on",
    "effective as of",
    "effective",
    "as of",
    "posted on",
    "posted",
    "dated",
    "published on",
    "published",
    "updated on",
    "updated",
    "update,",
    "update",
    "added on",
    "added",
    "withdrawn on",
    "withdrawn",
    "cancelled on",
    "cancelled",
    "canceled on",
    "canceled",
    "retracted on",
    "retracted",
    "starting",
    "from",
    "gilt ab",
    "gültig ab",
    "wirksam ab",
    "in kraft seit",
    "ab dem",
    "ab",
    "seit dem",
    "seit",
    "stand",
    "à partir du",
    "à compter du",
    "en vigueur le",
    "depuis le",
    "a partir del",
    "a partir de",
    "vigente desde el",
    "desde el",
    "a partire dal",
    "in vigore dal",
    "dal",
    "vanaf",
    "per",
    "sinds",
    "截至",
    "自",
    "从",
    "從",
    "于",
    "於",
)
# ... and after it ("2025年4月1日起生效", "2025年4月1日施行", "2025년 4월 1일부터 시행").
DATE_CUES_AFTER = (
    "起生效",
    "生效",
    "起施行",
    "起实施",
    "起",
    "施行",
    "から適用",
    "から施行",
    "発効",
    "부터 시행",
    "시행",
)

# What a question's words around a date say about the time it asks about:
# END: the period itself ("as of March 2024": its last day); BEFORE: the time before it
# ("before the April 2025 change": the day before it starts); START: its opening ("at the
# start of 2024"); AFTER: the time after it, no period to cut at ("after March 2024").
END, BEFORE, START, AFTER = "end", "before", "start", "after"
# Words before the date.
LEADS_BEFORE: dict[str, str] = {
    **dict.fromkeys(("as of", "back in", "in", "during", "around", "by", "since"), END),
    **dict.fromkeys(("stand", "im", "in", "per", "zum", "seit", "während", "um"), END),
    **dict.fromkeys(("en", "au", "à", "pendant", "depuis", "au cours de", "à la date du"), END),
    **dict.fromkeys(("durante", "desde", "a fecha de", "al", "nel", "nella", "dal"), END),
    **dict.fromkeys(("em", "no", "op", "tijdens", "sinds"), END),
    **dict.fromkeys(("截至", "截止", "到", "在", "于", "於", "自", "从", "從"), END),
    **dict.fromkeys(("at the start of", "at the beginning of", "zu beginn", "au début de"), START),
    **dict.fromkeys(("a principios de", "all'inizio del", "no início de"), START),
    **dict.fromkeys(("before", "just before", "until", "till", "up until", "prior to"), BEFORE),
    **dict.fromkeys(("vor", "bis", "bis zum", "avant", "jusqu'à", "jusqu'en"), BEFORE),
    **dict.fromkeys(("antes de", "hasta", "prima di", "prima del", "fino a", "até"), BEFORE),
    **dict.fromkeys(("voor", "vóór", "tot"), BEFORE),
    **dict.fromkeys(("after", "following", "nach", "après", "después de", "dopo", "na"), AFTER),
}
# Words after the date (Chinese, Japanese, Korean put them there).
LEADS_AFTER: dict[str, str] = {
    **dict.fromkeys(("時点", "时点", "当時", "當時", "現在", "时", "時", "的时候", "為止"), END),
    **dict.fromkeys(("为止", "までに", "まで", "から", "より", "以来", "起", "の", "に"), END),
    **dict.fromkeys(("は", "的", "기준", "당시", "현재", "에", "의", "부터", "까지"), END),
    **dict.fromkeys(("以前", "之前", "より前", "前", "이전", "전"), BEFORE),
    **dict.fromkeys(("以降", "以後", "以后", "之后", "之後", "后", "後", "이후", "후"), AFTER),
}


# Lucene's classic English stopword set plus question words: they carry no topic. Left
# out of a question's match unless nothing else is left (``search/query.py``): bm25
# weighs them little, but each adds its whole doclist to what FTS5 scores.
STOPWORDS = frozenset(
    """
    a an and are as at be but by for if in into is it no not of on or such that the their
    then there these they this to was will with what which who whom whose when where why
    how do does did done can could should would i you we he she them me my our your its
    been being have has had about from than so any all
    """.split()
)
# Function characters of Chinese questions (particles, copula, question words): a bigram or
# a single character holding one matches nearly every passage and only adds noise.
CJK_STOP_CHARS = frozenset("的了是在吗呢么哪什谁")


# The words of relation cues (``relations/detect.py`` builds its patterns from these):
# how a document's structure says that it corrects, replaces, updates or withdraws
# another (a heading, a status line, a header, a title mark), one row per language.
# Structural only: a cue that needs its sentence read belongs to the optional LLM pass.
# A heading that corrects what follows it, a colon or a connector allowed between:
# "Errata for …", "Berichtigung zur …", "Fe de erratas del …", "正誤表：…".
ERRATA_HEADS: dict[str, tuple[str, ...]] = {
    "en": ("errata", "erratum", "corrigendum"),
    "de": ("berichtigung", "erratum"),
    "fr": ("rectificatif", "erratum", "errata"),
    "es": ("fe de erratas", "erratas"),
    "zh": ("勘误表", "勘误", "更正"),
    "ja": ("正誤表", "訂正"),
}
# ... one that needs its connector ("Correction to …": "Correction: 30 days" is a fact).
CORRECTION_HEADS: dict[str, tuple[str, ...]] = {
    "en": ("correction", "corrections", "addendum", "amendment"),
    "de": ("korrektur", "nachtrag"),
    "fr": ("correction", "addendum"),
    "es": ("corrección", "adenda"),
}
# Between such a head and the name of what it corrects or withdraws.
HEAD_CONNECTORS: dict[str, tuple[str, ...]] = {
    "en": ("to", "for", "of", "on", "in"),
    "de": ("zur", "zum", "zu", "für", "des", "der", "von"),
    "fr": ("au", "aux", "à", "du", "des", "de", "pour"),
    "es": ("al", "a", "del", "de", "para"),
}
# A head that withdraws what it names: "WITHDRAWN: …", "Widerruf des …", "撤回：…".
WITHDRAWAL_HEADS: dict[str, tuple[str, ...]] = {
    "en": (
        "withdrawn retracted cancelled canceled rescinded revoked retraction withdrawal "
        "cancellation cancelation rescission"
    ).split(),
    "de": ("zurückgezogen", "widerrufen", "widerruf", "aufgehoben", "aufhebung"),
    "fr": ("retiré", "retirée", "retrait", "annulé", "annulée", "annulation", "abrogé"),
    "es": ("retirado", "retirada", "retiro", "anulado", "anulada", "anulación", "derogado"),
    "zh": ("已撤回", "撤回", "撤销", "作废", "废止", "停止执行", "取消"),
    "ja": ("撤回", "廃止"),
}
# A head or header naming what this document replaces: "Supersedes ADR-7",
# "Obsoletes: RFC 1234", "Annule et remplace : …", "取代：…".
REPLACES_HEADS: dict[str, tuple[str, ...]] = {
    "en": ("supersedes", "replaces", "obsoletes"),
    "de": ("ersetzt", "löst ab"),
    "fr": ("annule et remplace", "remplace"),
    "es": ("sustituye a", "reemplaza a", "sustituye", "reemplaza"),
    "zh": ("取代", "替代"),
    "ja": ("置き換え", "差し替え"),
}
# ... and what replaces it: "Superseded by ADR-12", "Ersetzt durch: …".
REPLACED_BY_HEADS: dict[str, tuple[str, ...]] = {
    "en": ("superseded by", "replaced by", "obsoleted by"),
    "de": ("ersetzt durch", "abgelöst durch"),
    "fr": ("remplacé par", "remplacée par"),
    "es": ("sustituido por", "sustituida por", "reemplazado por", "reemplazada por"),
}
# A header naming what this document updates, or what updated it (RFC headers).
UPDATES_HEADS: dict[str, tuple[str, ...]] = {"en": ("updates",), "ja": ("改訂",)}
UPDATED_BY_HEADS: dict[str, tuple[str, ...]] = {"en": ("updated by",)}
# The label of a status line ("Status: Withdrawn", reST ":Status:", AsciiDoc ":status:").
STATUS_LABELS = ("status", "statut", "estado", "状态", "状態", "ステータス")
# Status values that say a document is withdrawn ("Status: Withdrawn").
WITHDRAWN_STATUSES: dict[str, tuple[str, ...]] = {
    "en": ("withdrawn", "retracted", "cancelled", "canceled", "rescinded", "revoked", "called off"),
    "de": ("zurückgezogen", "widerrufen", "aufgehoben", "gilt nicht mehr"),
    "fr": ("retiré", "retirée", "annulé", "annulée", "abrogé"),
    "es": ("retirado", "retirada", "anulado", "anulada", "derogado"),
    "zh": ("已撤回", "已撤销", "已作废", "已废止", "作废", "废止"),
    "ja": ("撤回", "廃止"),
}
# Title marks that say so ("[RETRACTED] …"); not "[Cancelled] Open day", which names
# the event a notice cancels.
WITHDRAWN_MARKS: dict[str, tuple[str, ...]] = {
    "en": ("withdrawn", "retracted"),
    "de": ("zurückgezogen",),
    "fr": ("retiré",),
    "es": ("retirado",),
    "zh": ("已撤回", "撤回", "作废", "废止"),
    "ja": ("撤回", "廃止"),
}
