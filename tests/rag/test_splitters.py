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
    ParagraphSplitter,
    SentenceSplitter,
    WordSplitter,
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


def test_split_takes_documents() -> None:
    with pytest.raises(ConfigurationError, match="takes a Document"):
        ParagraphSplitter(10).split("text")  # type: ignore[arg-type]


words = st.text(alphabet="abcdefgh", min_size=1, max_size=12)
separators = st.sampled_from([" ", "  ", "\n", "\n\n", ". ", "! ", ".\n\n"])
documents = st.lists(st.tuples(words, separators), max_size=60).map(
    lambda parts: "".join(w + s for w, s in parts)
)


@settings(max_examples=200, deadline=None)
@given(
    text=documents,
    kind=st.sampled_from([ParagraphSplitter, SentenceSplitter, WordSplitter]),
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
