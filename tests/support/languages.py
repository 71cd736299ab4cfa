"""Texts in many languages for the search tests (tests/unit/domain/test_folding.py,
tests/integration/test_search_languages.py), each with the queries that must find a word of
it (and the word, as written, they must highlight) and queries that must find nothing."""

from __future__ import annotations

__all__ = ["LANGUAGES"]

#: ``(text, [(query, the word it must highlight)], [absent queries])`` per language.
LANGUAGES: dict[str, tuple[str, list[tuple[str, str]], list[str]]] = {
    "korean": (
        "우리는 한국어 문서를 발행처에 보냈다. API키를 확인하세요.",
        [
            ("우리는", "우리는"),
            ("한국어", "한국어"),
            ("발행처에", "발행처에"),
            ("키를", "키를"),
            ("API", "API"),
            ("발행처*", "발행처에"),
        ],
        ["한국", "우리", "영어"],
    ),
    "japanese": (
        "データベースのプログラムを作る。APIキーはｶﾞｲﾄﾞに書いた。iPhone用のアプリ。",
        [
            ("データベース", "データベース"),
            ("プログラム", "プログラム"),
            ("キー", "キー"),
            ("API", "API"),
            ("iphone", "iPhone"),
            ("用", "用"),
            ("ガイド", "ｶﾞｲﾄﾞ"),
            ("アプリ", "アプリ"),
        ],
        ["テータ", "カイド", "プロクラム"],
    ),
    "chinese": (
        "中文測試文件：資料庫與程式。",
        [("中文", "中文"), ("測試", "測試"), ("資料庫", "資料庫"), ("程式", "程式")],
        ["英文", "測驗"],
    ),
    "russian": (
        "Русский текст: ёжик и йогурт. ЕЩЁ РАЗ.",
        [
            ("русский", "Русский"),
            ("РУССКИЙ", "Русский"),
            ("Текст", "текст"),
            ("ёжик", "ёжик"),
            ("ежик", "ёжик"),
            ("йогурт", "йогурт"),
            ("ещё", "ЕЩЁ"),
            ("еще", "ЕЩЁ"),
        ],
        ["английский", "ёж"],
    ),
    "ukrainian": (
        "Українська мова: їжак і ґанок.",
        [
            ("українська", "Українська"),
            ("УКРАЇНСЬКА", "Українська"),
            ("їжак", "їжак"),
            ("ґанок", "ґанок"),
        ],
        ["російська"],
    ),
    "greek": (
        "Το κείμενο είναι στα Ελληνικά. ΆΛΦΑ και ωμέγα.",
        [
            ("κείμενο", "κείμενο"),
            ("κειμενο", "κείμενο"),
            ("ΚΕΙΜΕΝΟ", "κείμενο"),
            ("ελληνικα", "Ελληνικά"),
            ("Ελληνικά", "Ελληνικά"),
            ("άλφα", "ΆΛΦΑ"),
            ("ΩΜΕΓΑ", "ωμέγα"),
        ],
        ["βήτα"],
    ),
    "arabic": (
        "تحسين الإنتاجية في العمل. أحمد كَتَبَ الرسالة.",
        [
            ("الإنتاجية", "الإنتاجية"),
            ("أحمد", "أحمد"),
            ("كتب", "كَتَبَ"),
            ("كَتَبَ", "كَتَبَ"),
            ("الرسالة", "الرسالة"),
        ],
        ["الانتاجية", "احمد"],
    ),
    "hindi": (
        "हिन्दी भाषा में लिखा गया पाठ।",
        [("हिन्दी", "हिन्दी"), ("भाषा", "भाषा"), ("पाठ", "पाठ")],
        ["हिन्द", "अंग्रेज़ी"],
    ),
    "turkish": (
        "İstanbul'da KIZ kulesi ve ılık çay.",
        [
            ("istanbul", "İstanbul"),
            ("İSTANBUL", "İstanbul"),
            ("kız", "KIZ"),
            ("kiz", "KIZ"),
            ("ılık", "ılık"),
            ("ILIK", "ılık"),
            ("cay", "çay"),
            ("ÇAY", "çay"),
        ],
        ["ankara"],
    ),
    "german": (
        "Die Straße führt über Brücken nach Köln.",
        [
            ("strasse", "Straße"),
            ("STRASSE", "Straße"),
            ("straße", "Straße"),
            ("fuhrt", "führt"),
            ("ÜBER", "über"),
            ("brucken", "Brücken"),
            ("koln", "Köln"),
        ],
        ["berlin", "strase"],
    ),
    "vietnamese": (
        "Tiếng Việt rất đẹp và dễ đọc.",
        [
            ("tiếng", "Tiếng"),
            ("tieng", "Tiếng"),
            ("TIẾNG", "Tiếng"),
            ("viet", "Việt"),
            ("dep", "đẹp"),
            ("đẹp", "đẹp"),
            ("doc", "đọc"),
        ],
        ["tiengs", "hanoi"],
    ),
}
