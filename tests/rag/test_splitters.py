"""Splitters: segments within the size, slices of the document, whole units, exact overlaps."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import ConfigurationError, OpenAiTokenCountEstimator
from chatmemory.rag import (
    Document,
    DocumentKey,
    DocumentSplitter,
    LineSplitter,
    ParagraphSplitter,
    RegexSplitter,
    SentenceSplitter,
    TextSegment,
    WordSplitter,
    recursive_splitter,
)

TEXT = (
    "Refunds take five days. Cards are refunded first.\n\n"
    "Bank transfers take longer. They need a form.\n\n"
    "Contact support for anything else."
)


def texts(splitter: object, text: str) -> list[str]:
    return [s.text for s in splitter.split(Document(text))]  # type: ignore[attr-defined]


def test_whole_paragraphs_are_packed_up_to_the_size() -> None:
    assert texts(ParagraphSplitter(120), TEXT) == [
        "Refunds take five days. Cards are refunded first.\n\n"
        "Bank transfers take longer. They need a form.",
        "Contact support for anything else.",
    ]


def test_a_paragraph_too_large_goes_to_sentences_then_words() -> None:
    assert texts(ParagraphSplitter(30), TEXT) == [
        "Refunds take five days.",
        "Cards are refunded first.",
        "Bank transfers take longer.",
        "They need a form.",
        "Contact support for anything",
        "else.",
    ]


def test_a_word_too_large_goes_to_characters() -> None:
    assert texts(WordSplitter(4), "ab abcdefghij") == ["ab", "abcd", "efgh", "ij"]


STORY = (
    "The shop was quiet that evening. When Mrs. Jenkins approached the desk, night had fallen. "
    "Dr. Watson paid $3.50 in the U.S. office at 5 p.m. yesterday. He left."
)


def test_sentences_end_where_sentences_end_not_at_abbreviations() -> None:
    assert texts(SentenceSplitter(69), STORY) == [
        "The shop was quiet that evening.",
        "When Mrs. Jenkins approached the desk, night had fallen.",
        "Dr. Watson paid $3.50 in the U.S. office at 5 p.m. yesterday.",
        "He left.",
    ]


def test_a_name_is_never_cut_from_its_title_when_sentences_fit() -> None:
    for max_size in range(64, 200, 7):  # the longest sentence has 63 characters
        for segment in texts(ParagraphSplitter(max_size), STORY):
            assert not re.search(r"\b(Mrs|Dr|U\.S|p\.m)\.$", segment), (max_size, segment)


def test_a_long_paragraph_is_read_in_windows_without_moving_a_sentence_end() -> None:
    pool = [
        "When Mrs. Jenkins approached, night had fallen.",
        "Dr. Watson paid $3.50 in the U.S. office at 5 p.m. yesterday.",
        "He read.",
        "Was it 3.14 or e.g. pi?",
        "Some places and stories remain etched in our souls, offering lessons and moments.",
    ]
    chosen = [pool[(i * 7) % len(pool)] for i in range(900)]  # about 35,000 characters
    text = " ".join(chosen)
    ends, position = set(), 0
    for sentence in chosen:
        position = text.index(sentence, position) + len(sentence)
        ends.add(position)
    segments = SentenceSplitter(90).split(Document(text))
    for segment in segments:
        assert segment.metadata[DocumentKey.START] + len(segment.text) in ends, segment.text
    assert "".join(s.text + " " for s in segments) == text + " "


def test_a_long_paragraph_without_a_sentence_end_is_split_by_words() -> None:
    text = " ".join(f"word{i % 97}" for i in range(8000))  # about 55,000 characters
    segments = SentenceSplitter(500).split(Document(text))
    assert " ".join(s.text for s in segments) == text
    assert all(len(s.text) <= 500 for s in segments)


def test_text_the_sentence_rules_stumble_on_is_kept() -> None:
    # pysbd uses "∯" as a mark of its own and drops the sentence holding one
    assert texts(SentenceSplitter(20), "Price a∯b here. Next one.") == [
        "Price a∯b here.",
        "Next one.",
    ]


def test_line_breaks_inside_a_paragraph_do_not_end_sentences() -> None:
    wrapped = "Refunds take five days\nfor cards. Bank transfers\ntake longer."
    assert texts(SentenceSplitter(40), wrapped) == [
        "Refunds take five days\nfor cards.",
        "Bank transfers\ntake longer.",
    ]


def test_overlap_repeats_whole_words_of_the_previous_segment() -> None:
    segments = texts(SentenceSplitter(40, 12), TEXT)
    assert segments[:3] == [
        "Refunds take five days.",
        "five days. Cards are refunded first.",
        "first.\n\nBank transfers take longer.",
    ]


def test_segments_inherit_metadata_and_get_their_index() -> None:
    document = Document(TEXT, {DocumentKey.SOURCE: "/docs/refunds.md"})
    segments = SentenceSplitter(60).split(document)
    assert [s.metadata[DocumentKey.INDEX] for s in segments] == list(range(len(segments)))
    assert {s.metadata[DocumentKey.SOURCE] for s in segments} == {"/docs/refunds.md"}


def test_a_character_is_never_cut_even_when_it_counts_more_tokens_than_fit() -> None:
    estimator = OpenAiTokenCountEstimator("gpt-4o")
    assert estimator.count_text("🦜") > 1
    assert texts(WordSplitter(1, estimator=estimator), "a 🦜") == ["a", "🦜"]


def test_token_sizes_use_the_exact_count() -> None:
    estimator = OpenAiTokenCountEstimator("gpt-4o")
    text = " ".join(f"word{i}" for i in range(300))
    segments = texts(WordSplitter(50, 10, estimator=estimator), text)
    assert all(estimator.count_text(s) <= 50 for s in segments)
    assert max(estimator.count_text(s) for s in segments) > 40  # packed, not one word each
    assert "(50 tokens, overlap=10)" in repr(WordSplitter(50, 10, estimator=estimator))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_size": 0}, "`max_size` must be at least 1"),
        ({"max_size": 10, "overlap": 10}, "must be smaller than `max_size`"),
        ({"max_size": "10"}, "`max_size` must be an int"),
        ({"max_size": 10, "overlap": -1}, "`overlap` must be an int >= 0"),
        ({"max_size": 10, "estimator": len}, "must be a TokenCountEstimator"),
    ],
)
def test_bad_settings_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        ParagraphSplitter(**arguments)  # type: ignore[arg-type]


def test_split_takes_documents_or_text() -> None:
    with pytest.raises(ConfigurationError, match="takes a Document, or a str for its units"):
        ParagraphSplitter(10).split(42)  # type: ignore[call-overload]


def test_split_of_a_text_gives_its_units_as_langchain4j_split_string() -> None:
    assert SentenceSplitter(10).split(STORY) == [
        "The shop was quiet that evening.",
        "When Mrs. Jenkins approached the desk, night had fallen.",
        "Dr. Watson paid $3.50 in the U.S. office at 5 p.m. yesterday.",
        "He left.",
    ]
    assert ParagraphSplitter(10).split(TEXT) == TEXT.split("\n\n")
    assert LineSplitter(10).split(" one\n\n two \r\nthree") == ["one", "two", "three"]
    assert WordSplitter(10).split(" one  two\n") == ["one", "two"]
    assert RegexSplitter(";", 10).split("a; b;;c") == ["a", "b", "c"]
    assert SentenceSplitter(10).split("  ") == []


def test_split_all_splits_each_document_with_its_own_index_and_metadata() -> None:
    documents = [Document("One. Two.", {"n": 1}), Document("Three.", {"n": 2})]
    segments = SentenceSplitter(6).split_all(documents)
    assert [(s.text, s.metadata["n"], s.metadata[DocumentKey.INDEX]) for s in segments] == [
        ("One.", 1, 0),
        ("Two.", 1, 1),
        ("Three.", 2, 0),
    ]
    assert SentenceSplitter(5).split_all([]) == []
    with pytest.raises(ConfigurationError, match="split_all\\(\\) takes Documents"):
        SentenceSplitter(5).split_all("One. Two.")  # type: ignore[arg-type]


def test_a_sub_splitter_takes_units_too_large() -> None:
    splitter = LineSplitter(20, sub_splitter=WordSplitter(8))
    assert texts(splitter, "short line\na line much too long here") == [
        "short line",
        "a line",  # the sub-splitter's own size
        "much too",
        "long",
        "here",
    ]


def test_the_overlap_reaches_into_and_out_of_a_sub_splitter() -> None:
    text = "Alpha beta. Gamma delta epsilon zeta eta theta. Iota kappa."
    assert texts(SentenceSplitter(24, 6), text) == [
        "Alpha beta.",
        "beta. Gamma delta",  # the sentence too long is split by words, with the overlap first
        "delta epsilon zeta eta",
        "eta theta.",
        "theta. Iota kappa.",
    ]


class Shouting:
    """A sub-splitter of someone else's: its segments are not slices of the text."""

    def split(self, document: Document) -> list[TextSegment]:
        return [TextSegment(word.upper()) for word in document.text.split()] + [TextSegment(" ")]


def test_a_sub_splitter_of_your_own_is_taken_as_it_answers() -> None:
    splitter = ParagraphSplitter(12, sub_splitter=Shouting())
    assert isinstance(Shouting(), DocumentSplitter)
    segments = splitter.split(Document("Tiny.\n\nlarge paragraph"))
    assert [s.text for s in segments] == ["Tiny.", "LARGE", "PARAGRAPH"]
    assert [s.metadata[DocumentKey.INDEX] for s in segments] == [0, 1, 2]
    assert DocumentKey.START not in segments[1].metadata  # found nowhere in the document
    found = ParagraphSplitter(12, sub_splitter=_Words()).split(Document("x\n\nlarge paragraph"))
    assert [(s.text, s.metadata[DocumentKey.START]) for s in found][1:] == [
        ("large", 3),
        ("paragraph", 9),
    ]


class _Words:
    def split(self, document: Document) -> list[TextSegment]:
        return [TextSegment(word) for word in document.text.split()]


def test_a_regex_may_cut_before_what_it_matches() -> None:
    text = "# One\nFirst part.\n# Two\nSecond part."
    assert texts(RegexSplitter(r"(?m)^(?=# )", 25), text) == [
        "# One\nFirst part.",
        "# Two\nSecond part.",
    ]
    compiled = RegexSplitter(re.compile("x", re.I), 5)
    assert compiled.split("aXb") == ["a", "b"]
    assert repr(compiled) == "RegexSplitter(re.compile('x', re.IGNORECASE), 5 chars, overlap=0)"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"pattern": "("}, "`pattern` is not a regular expression (missing ), unterminated"),
        ({"pattern": 3}, "`pattern` must be a str or a compiled re.Pattern, got 3"),
        ({"pattern": r"\s*"}, "`pattern` '\\\\s*' matches the empty text: it would cut"),
        ({"pattern": ",", "sub_splitter": len}, "`sub_splitter` must have split(document)"),
    ],
)
def test_bad_regex_settings_are_refused(arguments: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"max_size": 10, **arguments}
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        RegexSplitter(**settings)  # type: ignore[arg-type]


def test_sentences_follow_the_language_given() -> None:
    german = "Das kostet ca. 5 Euro. Danach gehen wir."
    assert SentenceSplitter(30, language="de").split(german) == [
        "Das kostet ca. 5 Euro.",
        "Danach gehen wir.",
    ]
    assert repr(SentenceSplitter(30, language="de")) == (
        "SentenceSplitter(30 chars, overlap=0, language='de')"
    )
    with pytest.raises(ConfigurationError, match="`language` must be one pysbd knows"):
        SentenceSplitter(30, language="xx")


words = st.text(alphabet="abcdefgh", min_size=1, max_size=12)
separators = st.sampled_from([" ", "  ", "\n", "\n\n", ". ", "! ", ".\n\n"])
documents = st.lists(st.tuples(words, separators), max_size=60).map(
    lambda parts: "".join(w + s for w, s in parts)
)


@settings(max_examples=200, deadline=None)
@given(
    text=documents,
    kind=st.sampled_from(
        [
            ParagraphSplitter,
            SentenceSplitter,
            WordSplitter,
            recursive_splitter,
            lambda size, overlap: RegexSplitter(
                "\n", size, overlap, sub_splitter=WordSplitter(size)
            ),
        ]
    ),
    max_size=st.integers(1, 60),
    overlap_share=st.floats(0, 0.9),
)
def test_segments_fit_cover_the_text_in_order_and_overlap_within_bounds(
    text: str, kind: type[ParagraphSplitter], max_size: int, overlap_share: float
) -> None:
    overlap = int(max_size * overlap_share)
    segments = texts(kind(max_size, overlap), text)
    assert all(0 < len(s) <= max_size for s in segments)
    spans = [
        (s.metadata[DocumentKey.START], s.metadata[DocumentKey.START] + len(s.text))
        for s in kind(max_size, overlap).split(Document(text))
    ]
    assert [text[a:b] for a, b in spans] == segments
    covered_to = 0
    for start, end in spans:
        assert covered_to - overlap <= start  # at most `overlap` repeated
        assert start <= covered_to or not text[covered_to:start].strip()  # nothing skipped
        assert end > covered_to
        covered_to = end
    assert not text[covered_to:].strip()
