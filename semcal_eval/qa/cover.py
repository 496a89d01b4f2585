"""The ``cover`` answer judge's core: does an answer *cover* a gold alias, and claim nothing beside it?

Pure functions, strings in and booleans out; :mod:`semcal_eval.qa.grading` wraps them as semcal's grader
(:func:`~semcal_eval.qa.grading.grade`) and agreement (:func:`~semcal_eval.qa.grading.agree`).

**Reading a text** (:func:`tokens`). NFKC, confusable letters to Latin, diacritics dropped, case folded (as
:func:`semcal_eval.qa.answers.fold`); invisible characters (Unicode categories Cf/Cc/Co/Cs/Cn: zero-width
space and joiner, BOM, soft hyphen, word joiner, …) removed; every line or paragraph separator (U+2028,
U+2029, U+0085, VT, FF, CR) read as a newline. Words glued by a missing space are split ("onDecember"), a
citation mark glued to a word is dropped ("Murray1", "MacLellan⁶"), a hyphen inside a word is dropped
("non-partisan" = "nonpartisan") unless one side is a number word ("eight-episode"), a possessive is the word
("Joan's" = "Joan"). Numbers are canonical: thousands commas removed ("1,945" = "1945"), trailing decimal zeros
dropped ("36.0" = "36"), number words and ordinals read as digits ("four" = "4", "2nd" = "2", "twenty-seven" =
"27", "twenty-first" = "21"); any other punctuation inside a number splits it ("19/45", "19-45" are two
numbers; "194.5" is one, ≠ 1945); a season's second year is written in full ("1979–80" = "1979-1980").
Month names are one token each ("Sept." = "September" = "sep").

**Covering a gold** (:func:`covers`). The gold's *evidence* is its content words (not stop words) that the
question does not already hold: repeating the question proves nothing. Two words match when equal, or when
they are two forms of one word (a common stem of ≥ 5 letters followed by endings of a short list: "hieroglyph|s"
~ "hieroglyph|ic", "Egypt" ~ "Egypt|ian", not "Pari" ~ "Paris"); numbers only when equal. The answer covers the
gold when, inside one window of the answer (the gold's length + :data:`WINDOW` tokens):

- every number of the evidence appears, and at least :data:`THETA` of its words (a sentence gold, ≥
  :data:`SENTENCE_MIN_TOKENS` content words: :data:`THETA_SENTENCE` of them and every proper noun);
- for a short gold matched in part, its last word (the head: a surname, the noun) is matched, and no missing
  gold word's place is taken by another content word ("Michelle Obama" for "Barack Obama"); titles and roles
  ("President Obama") and initials ("B. Obama") may stand there. A gold that names several things ("Lyon and
  Nice", "yes, no") is matched only whole;
- a date gold ("September 4, 2000") is also covered by its year, with its month or not ("in 2000", "September
  2000"), where no other month or day stands beside it ("May 2000" is not).

In a text with glued words (a chat interface's bold text loses its spaces: "byRicky Nelsonin the"), a capitalized
word that is a gold word with a function word stuck on (:data:`_GLUE`) matches that gold word.

**Claiming nothing beside it** (:func:`claims_alone`, the checks of :data:`DEFENCES`): the match is refused when
the answer

- hedges or offers alternatives next to it (:data:`ALTERNATIVES`, :data:`HEDGES`, "/" or "|" within
  :data:`ALT_WINDOW` tokens; anywhere in a short answer);
- negates it (:data:`NEGATIONS` in the :data:`NEG_WINDOW` tokens before, "wrong"/"not" after);
- names a candidate right beside it (:func:`_neighbour_rival`: "Lyon Paris", "Lyon Paris is it."), also across
  chatter or the gold said again ("Paris I think Lyon", "Lyon is the answer Paris", "Paris Paris Lyon"), or in a
  short sentence beside a sentence that is only the match (:func:`_sentence_rival`: "The answer is Lyon! Paris");
  in a cased sentence a word beside a number gold is what it counts, no candidate ("the 1960 Summer Olympics",
  "336 AD"), while in a bare answer it still is ("1960 Lyon");
- lists it beside a candidate of the same kind: an item next to the match, split off by any mark but quotes, a
  colon or a full stop, or by "and", holding content words that the question does not hold (in a long answer only
  items of 1–:data:`ITEM_MAX` words count: a longer one is a clause; a date's month and day refine a year and are no
  rival; a word is no rival to a number, nor a number to a word). Across a spaced dash or a bracket, a
  capitalized name in a clause is a rival too ("The answer is Lyon - Paris", "The answer is Lyon (Paris)");
  across "and" or a comma it is a partner ("sung by Kygo and Selena Gomez").

The other gold aliases' words are no rival: naming two accepted answers of a set question, or two aliases of one
answer ("Hellenism or Hellenic polytheism"), claims nothing wrong. Titles, kinds of thing that complete a name
("Sandown Park", "Caucasus Mountains"), places after a name, and an initial are no candidate either.

Why these and not exact match: exact match (semcal's ``strict`` rule) is wrong about most correct long answers
(docs/JUDGE.md: it agrees with people on 0.40 of EVOUNA's NQ answers). Why not containment alone: containment
pays a policy for listing its candidates ("Lyon, Paris") and ignores negation. The constants were chosen on
EVOUNA by 5-fold cross-validation by question (benchmarks/bench_judge_humans.py); the numbers are measured
there, per system and per answer length, with what each defence costs in agreement and buys against listings.
The rules of 2026-12-05 (dates, seasons, other golds, list marks, a capital at a sentence start, possessives,
initials, kinds of thing, dashes, brackets, chatter and sentences side by side) and of 2026-12-06 (compound
number words, a word beside a number gold, glued names, a long gold's opening name) were written reading folds 0–2
of that split only; folds 3–4 measure them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from .answers import CONFUSABLES

__all__ = [
    "THETA", "THETA_SENTENCE", "WINDOW", "ALT_WINDOW", "NEG_WINDOW", "SHORT_EXTRA", "ITEM_MAX",
    "SENTENCE_MIN_TOKENS", "STOP_WORDS", "TITLES", "KINDS", "HEDGES", "ALTERNATIVES", "NEGATIONS", "Token", "clean",
    "check_text", "tokens", "content", "is_empty", "words_match", "covers", "CoverError",
]

#: share of a short gold's evidence words the answer must hold (numbers: all of them)
THETA = 0.5
#: share of a sentence gold's evidence words (and every proper noun and number)
THETA_SENTENCE = 0.5
#: a gold of this many content words or more is a sentence answer (MS MARCO's human answers often are)
SENTENCE_MIN_TOKENS = 5
#: the evidence must sit inside the gold's length + WINDOW tokens of the answer
WINDOW = 8
#: alternatives and hedges count within this many tokens of the match (anywhere in a short answer)
ALT_WINDOW = 1
#: negations count within this many tokens before the match ("wrong", "not" that many after)
NEG_WINDOW = 3
#: an answer with at most this many content words beyond the gold and the question is short
SHORT_EXTRA = 4
#: a list item next to the match with 1..ITEM_MAX content words is a rival candidate
ITEM_MAX = 3
#: an answer longer than this many characters is refused (a clear error, not a slow grade)
MAX_CHARS = 1_000_000


class CoverError(ValueError):
    """An answer or gold the judge cannot read (not a string, too long)."""


STOP_WORDS = frozenset("""
a an the of in on at to for by from with as into onto upon about over under and or but nor is are was were be been
being am do does did has have had it its this that these those there here which who whom whose what when where why
how than then so such he she they them his her their him i we you your our my me us one s
""".split())
#: words that may stand before a name without naming someone else (titles, roles, kinds of place)
TITLES = frozenset("""
mr mrs ms miss dr doctor sir lord lady dame saint st king queen prince princess president pres senator sen governor
gov general gen captain capt professor prof rev reverend judge justice emperor empress pope chancellor minister
prime actor actress singer band group rapper musician artist writer author poet painter director producer composer
player team club city town village state country province county region river mount mountain lake island family
dynasty empire fc company inc ltd corporation co jr jnr junior sr snr senior ii iii iv university college
""".split())
#: kinds of thing that complete a name right after it ("Sandown Park", "Caucasus Mountains", "the 1979-80 season"):
#: no rival there, and no head of a gold ("Caucasus" is the head of "Caucasus Mountains"); before the name or across a
#: mark they are ordinary words ("Mountains Zhu Di", "century & 2017")
KINDS = frozenset("""
army navy park station airport international church cathedral hall stadium arena bridge street avenue road square
museum school cup award prize tower center centre building palace castle bay beach valley desert ocean sea forest
national records studios pictures airlines motors technologies hospital library theatre theater festival
mountains mountain hills canal railway province district season year era century decade
""".split())
HEDGES = frozenset("maybe perhaps possibly probably likely unlikely unsure guess might either".split())
ALTERNATIVES = frozenset("or nor vs versus".split())
NEGATIONS = frozenset(
    "not no never neither none nobody nothing isnt wasnt arent werent dont doesnt didnt cannot cant wont wouldnt "
    "shouldnt couldnt hasnt havent hadnt"
    # the same word in the languages an answer most often switches to ("La réponse est Lyon, pas Paris"): none
    # stands in an EVOUNA answer where people accept the gold beside it (benchmarks/results/judge_humans/HISTORY.md)
    " pas nicht kein keine niet nao".split())
_WRONG_AFTER = frozenset("not wrong incorrect false untrue".split())
#: countries and US states: a place named after the gold qualifies it ("Paris, France", "Austin, Texas")
PLACES = frozenset(w for w in """
afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan bahamas bahrain
bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia botswana brazil brunei bulgaria burundi
cambodia cameroon canada chad chile china colombia congo croatia cuba cyprus czechia czech denmark djibouti
dominica ecuador egypt england eritrea estonia eswatini ethiopia fiji finland france gabon gambia georgia germany
ghana greece grenada guatemala guinea guyana haiti honduras hungary iceland india indonesia iran iraq ireland
israel italy jamaica japan jordan kazakhstan kenya kiribati korea kosovo kuwait kyrgyzstan laos latvia lebanon
lesotho liberia libya liechtenstein lithuania luxembourg madagascar malawi malaysia maldives mali malta
mauritania mauritius mexico micronesia moldova monaco mongolia montenegro morocco mozambique myanmar namibia
nauru nepal netherlands holland nicaragua niger nigeria norway oman pakistan palau palestine panama paraguay peru
philippines poland portugal qatar romania russia rwanda samoa senegal serbia seychelles singapore slovakia
slovenia somalia spain sudan suriname sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga
trinidad tunisia turkey turkmenistan tuvalu uganda ukraine uruguay uzbekistan vanuatu vatican venezuela vietnam
yemen zambia zimbabwe scotland wales britain uk usa us america
alabama alaska arizona arkansas california colorado connecticut delaware florida hawaii idaho illinois indiana
iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota mississippi missouri montana
nebraska nevada hampshire jersey mexico york carolina dakota ohio oklahoma oregon pennsylvania rhode tennessee
texas utah vermont virginia washington wisconsin wyoming
""".split())
#: words that say how sure the answer is, not what it is ("I think", "for sure"); hedges are apart (they count)
CHATTER = frozenset("think believe sure know answer correct right definitely certainly say final pretty quite very "
                    "indeed would im id ive well hmm ok okay q".split())  # q: "Q: A: Paris"; id: "I'd say"
#: an item that starts with one of these is an apposition or a clause ("…, a German physicist"), not a rival
_CLAUSE_START = frozenset(
    "a an the who which whose that this its his her their is was are were in on at of from by for with as known "
    "also born i we you he she they it im its but so because although if though since".split())

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update(thirty=30, forty=40, fifty=50, sixty=60, seventy=70, eighty=80, ninety=90, hundred=100)
_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split())}
_MONTHS = {m: m[:3] for m in
           "january february march april may june july august september october november december".split()}
_MONTHS.update({m[:3]: m[:3] for m in list(_MONTHS)}, sept="sep")
_MONTH_TOKENS = frozenset(_MONTHS.values())
_CONFUSE = str.maketrans(CONFUSABLES)
_LINES = dict.fromkeys(map(ord, "\r\v\f\x85\u2028\u2029\x1c\x1d\x1e"), "\n")
_DROP_CATEGORIES = frozenset(("Cf", "Cc", "Co", "Cs", "Cn"))
#: numbers, words, and every other mark as a separator of its own ("Lyon·Paris", "Lyon (Paris)", "1. Lyon")
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+|\n|[^\w\s]")
_SENTENCE_END = frozenset(".!?\n")
_CLAIM_END = frozenset(".!?")
#: words that make a text a sentence rather than a bare answer (a name, a list)
_VERBS = frozenset("is are was were be been being am has have had do does did will would can could should may "
                   "must shall".split())


@dataclass(frozen=True)
class Token:
    """One token of a read text: ``text`` (folded) and ``kind`` ("w" word, "n" number, "sep" separator mark);
    ``cap``: the word was written with a capital inside a sentence (a name, not a sentence's first word)."""

    text: str
    kind: str
    cap: bool = False
    upper: bool = False  # written with a capital, wherever it stands (the text is cased when some words are)
    spaced: bool = False  # a mark with a space before it: "Paris - Lyon", not "4-inch" or "2017-2018"
    glued: bool = False  # a capitalized word in a text whose words are glued ("byRicky Nelsonin the")


def clean(text: str) -> str:
    """NFKC, confusables to Latin, separators to newlines, invisible characters removed (case kept).

    >>> clean("Pa\\u200bris\\u2028Lyon"), clean("\\ufeffLу\\u00adon")
    ('Paris\\nLyon', 'Lyon')
    """
    s = unicodedata.normalize("NFKC", text).translate(_CONFUSE).translate(_LINES)
    return "".join(c for c in s if c in "\n\t" or unicodedata.category(c) not in _DROP_CATEGORIES)


def check_text(text, what: str) -> str:
    if not isinstance(text, str):
        raise CoverError(f"{what} must be a string, got {type(text).__name__} ({str(text)[:40]!r}); "
                         "pass the decoded text (str(x) if you mean its printed form)")
    if len(text) > MAX_CHARS:
        raise CoverError(f"{what} has {len(text):,} characters, over the judge's limit of {MAX_CHARS:,}; "
                         "truncate generations at max_gen_toks before grading")
    return text


_YEAR_RANGE = re.compile(r"\b(\d\d)(\d\d)\s*[-\u2010-\u2015]\s*(\d\d)\b")


#: words a chat interface glues to a bolded name when it drops the spaces around it ("byRicky Nelsonin the")
_GLUE = frozenset("in on at for and the was is to of from by with as who which that probably also has had were are or "
                  "but his her its their after before during between since when where while".split())
_HYPHENED = re.compile(r"\b([^\W\d_]+)-([^\W\d_]+)\b")
_NUMERIC_WORDS = frozenset(_NUMBER_WORDS) | frozenset(_ORDINALS)


def _number_hyphen(m: re.Match) -> str:
    """ "twenty-seven", "eight-episode", "fifth-most": a number word is a word of its own (not "nonpartisan")."""
    a, b = m[1].casefold(), m[2].casefold()
    return f"{m[1]} {m[2]}" if a in _NUMERIC_WORDS or b in _NUMERIC_WORDS else m[0]


def _full_range(m: re.Match) -> str:
    """ "1979–80" → "1979-1980": the second year written in full (only when it follows the first)."""
    return f"{m[1]}{m[2]}-{m[1]}{m[3]}" if int(m[3]) > int(m[2]) else m[0]


def tokens(text: str) -> tuple[Token, ...]:
    """The judge's reading of a text (module docstring): words, canonical numbers and separator marks. Cached:
    a group of K answers is read once per answer, not once per pair.

    >>> [t.text for t in tokens("On September 2nd, 1,945 — not 19/45")]
    ['on', 'sep', '2', ',', '1945', '-', 'not', '19', '/', '45']
    """
    return _tokens(check_text(text, "text"))


@functools.lru_cache(maxsize=1024)
def _tokens(text: str) -> tuple[Token, ...]:
    s = clean(text)
    s, glued = re.subn(r"(?<=[a-z]{2})(?=[A-Z][a-z])", " ", s)  # words glued by a missing space: "onDecember"
    s = "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c)).translate(_CONFUSE)
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # thousands: 1,945
    s = _YEAR_RANGE.sub(_full_range, s)  # a season "1979–80" is "1979-1980"
    s = re.sub(r"(?<=[^\W\d_])['’`]s\b", "", s)  # a possessive names the same thing: "Joan's" = "Joan"
    s = _HYPHENED.sub(_number_hyphen, s)  # "twenty-seven" is two number words, "eight-episode" a number and a word
    s = re.sub(r"(?<=[^\W\d_])['’`-](?=[^\W\d_])", "", s)  # non-partisan, isn't
    s = re.sub(r"(?<=[^\W\d_]{3})\d{1,2}\b", " ", s)  # a citation mark glued to a word: "episodes1"
    s = re.sub(r"(?<=\d)(?=[^\W\d_])|(?<=[^\W\d_])(?=\d)", " ", s)  # 6ft, 2nd
    out: Sequence[Token] = []
    start = True  # at the start of a sentence: a capital says nothing
    tens = False
    for m in _TOKEN.finditer(s):
        raw = m.group()
        t = raw.casefold()
        was_tens, tens = tens, False
        if t[0].isdigit():
            if "." in t:
                t = t.rstrip("0").rstrip(".")
            out.append(Token(t.lstrip("0") or "0", "n"))
        elif not (t[0].isalpha() or t[0] == "_") or t == "\n":
            if t == "." and out and out[-1].kind == "w" and len(out[-1].text) == 1:
                continue  # the point of an initial: "B. Obama"
            spaced = m.start() > 0 and s[m.start() - 1].isspace()
            out.append(Token("-" if t in "\u2014\u2013" else t, "sep", spaced=spaced))
            start = start or t in _SENTENCE_END
            continue
        elif t in _NUMBER_WORDS:
            v = _NUMBER_WORDS[t]
            if 0 < v < 10 and was_tens:  # "twenty seven" is 27
                out[-1] = Token(str(int(out[-1].text) + v), "n")
            else:
                out.append(Token(str(v), "n"))
            tens = 20 <= v < 100 and v % 10 == 0
            start = False
            continue
        elif t in _ORDINALS:
            v = _ORDINALS[t]
            if v < 10 and was_tens:  # "twenty-first" is 21
                out[-1] = Token(str(int(out[-1].text) + v), "n")
            else:
                out.append(Token(str(v), "n"))
        elif t in _MONTHS:
            out.append(Token(_MONTHS[t], "w"))
        elif t in ("st", "nd", "rd", "th") and out and out[-1].kind == "n":
            continue  # the ordinal suffix of 2nd, 21st
        else:
            out.append(Token(t, "w", raw[0].isupper() and not start, raw[0].isupper(),
                             glued=bool(glued) and raw[0].isupper()))
        start = False
    return tuple(out)


def content(text: str) -> list[str]:
    """The words and numbers of a text (no separator marks)."""
    return [t.text for t in tokens(text) if t.kind != "sep"]


def is_empty(text: str) -> bool:
    """True iff the text holds no letter or digit (empty, blank, punctuation or invisible characters only)."""
    return not content(text)


#: endings that make another form of one word ("hieroglyph|s" ~ "hieroglyph|ic", "Egypt|ian")
_SUFFIXES = frozenset("s es e ic ics al an ans ian ians n ns ese ish ed ing er ers y ies".split()) | {""}


def words_match(a: str, b: str) -> bool:
    """Equal, or two forms of one word: a common stem of ≥ 5 letters followed by endings of
    :data:`_SUFFIXES` on both sides; numbers only when equal.

    >>> words_match("hieroglyphs", "hieroglyphic"), words_match("egypt", "egyptian"), words_match("pari", "paris")
    (True, True, False)
    >>> words_match("austria", "australia"), words_match("6", "6.5")
    (False, False)
    """
    if a == b:
        return True
    if a[0].isdigit() or b[0].isdigit() or min(len(a), len(b)) < 5:
        return False
    c = 0
    for x, y in zip(a, b):
        if x != y:
            break
        c += 1
    # the stem may end inside an ending ("confederat|e" ~ "confederat|es"): try the stem one letter shorter too
    return any(c - k >= 5 and a[c - k:] in _SUFFIXES and b[c - k:] in _SUFFIXES for k in (0, 1, 2))


def _caps(text: str) -> set[str]:
    """Words written with a capital inside a sentence (proper nouns), folded."""
    out, start = set(), True
    for m in re.finditer(r"[^\W\d_]+|[.!?\n]", clean(text)):
        w = m.group()
        if w in ".!?\n":
            start = True
            continue
        if not start and w[0].isupper():
            out.update(x.text for x in tokens(w))
        start = False
    return out


@dataclass
class _Gold:
    words: list[str]  # all gold words and numbers
    evidence: list[str]  # content words the question does not hold
    echoed: bool  # every content word of the gold is in the question
    sentence: bool
    keys: frozenset[str]  # evidence that must be matched: numbers (and a sentence gold's proper nouns)
    numeric: bool
    listy: bool  # the gold names several things ("Lyon and Nice", "yes, no"): each must be covered


def _question_stems(question: str) -> list[str]:
    return [w for w in content(question) if w not in STOP_WORDS]


def _in(word: str, words: Sequence[str]) -> bool:
    return any(words_match(word, x) for x in words)


def _read_gold(gold: str, question_words: Sequence[str], alone: bool = True) -> _Gold | None:
    return _read_gold_cached(gold, tuple(question_words), alone)


@functools.lru_cache(maxsize=1024)
def _read_gold_cached(gold: str, question_words: tuple[str, ...], alone: bool) -> _Gold | None:
    toks = tokens(gold)
    words = [t.text for t in toks if t.kind != "sep"]
    if not words:
        return None
    # another answer read as a gold (agreement): its hedges and chatter say how sure it is, not what it claims
    drop = STOP_WORDS if alone else STOP_WORDS | HEDGES | CHATTER
    cont = [w for w in words if w not in drop] or words
    evidence = [w for w in cont if not _in(w, question_words)]
    echoed = not evidence
    evidence = evidence or cont
    sentence = len(cont) >= SENTENCE_MIN_TOKENS
    # numbers and negations must be matched: "Paris" does not cover "not Paris"
    keys = {w for w in evidence if w[0].isdigit() or w in NEGATIONS}
    if sentence:
        caps = _caps(gold)
        keys |= {w for w in evidence if w in caps}
    inner = toks[1:-1]
    parts = [p.split() for p in " ".join(t.text for t in toks).split(",")]
    comma_list = len(parts) > 1 and all(0 < len(p) <= 2 and not set(p) & PLACES for p in parts)
    listy = not sentence and (comma_list or any(
        (t.kind == "sep" and t.text in ";/|&+\n") or t.text in ("and", "or", "nor") for t in inner))
    return _Gold(words, evidence, echoed, sentence, frozenset(keys), any(w[0].isdigit() for w in evidence), listy)


def _best_window(hits: list[tuple[int, int]], n_evidence: int, width: int) -> dict[int, int]:
    """The window of ``width`` answer tokens holding the most distinct evidence words (two pointers over the
    hits, sorted by answer position): evidence index → the answer position that matched it."""
    best: dict[int, int] = {}
    count: dict[int, int] = {}
    lo = 0
    for hi in range(len(hits)):
        count[hits[hi][1]] = count.get(hits[hi][1], 0) + 1
        while hits[hi][0] - hits[lo][0] >= width:
            j = hits[lo][1]
            count[j] -= 1
            if not count[j]:
                del count[j]
            lo += 1
        if len(count) > len(best):
            best = {}
            for i, j in hits[lo: hi + 1]:
                best.setdefault(j, i)
        if len(best) == n_evidence:
            break
    return best


#: marks that do not split a list: quotes, a colon and a full stop ('Bob Dylan wrote "Knockin' on Heaven's Door."',
#: "Kenneth Wolstenholme: Football"); every other mark does ("Lyon, Paris", "Lyon - Paris", "Paris (Lyon)"), as
#: does "and". A full stop between bare names is the neighbour check's ("Lyon. Paris").
_NOT_LIST_MARKS = frozenset("\"'`:.\u201c\u201d\u2018\u2019\u00ab\u00bb")
_DASHES = frozenset("-\u2013\u2014\u2012\u2015")  # a dash joins two names without saying "and"
_JOINS = _DASHES | frozenset("()[]")  # so does a bracket, except right after a name: "won (KRW)" is an alias


def _list_mark(t: Token) -> bool:
    return (t.kind == "sep" and t.text not in _NOT_LIST_MARKS) or t.text == "and"


def _item_at(toks: Sequence[Token], start: int, step: int) -> list[int]:
    """The indices, in reading order, of the words and numbers of the list item that begins just past the separator
    at ``start`` (walking by ``step``); quotes and colons inside an item are no words of it."""
    out, i = [], start + step
    while 0 <= i < len(toks) and not (_list_mark(toks[i]) or toks[i].text in _SENTENCE_END):
        if toks[i].kind != "sep":
            out.append(i)
        i += step
    return out if step > 0 else out[::-1]


def _item(toks: Sequence[Token], start: int, step: int) -> list[str]:
    """The words of the item :func:`_item_at` finds."""
    return [toks[i].text for i in _item_at(toks, start, step)]


def _explained(toks: Sequence[Token], i: int, lo: int, hi: int, gold: _Gold, question_words: Sequence[str],
               others: frozenset[str] = frozenset()) -> bool:
    """Is answer word ``i`` one that claims nothing beside the gold: a stop word, title, chatter or lead-in word,
    a word of the gold or the question, a word inside the match ("Barack Hussein Obama"), a date's month and
    day next to the gold's year ("September 2, 1945")?"""
    w = toks[i].text
    if w in STOP_WORDS or w in TITLES or w in CHATTER or w in PLACES or w in others or lo <= i <= hi:
        return True
    if len(w) == 1 and toks[i].kind == "w" and all(len(e) > 1 for e in gold.evidence):
        return True  # an initial ("Rutherford B. Hayes") names no candidate when the gold is no letter
    if w in KINDS and i == hi + 1:
        return True
    if _in(w, gold.words) or (not gold.echoed and _in(w, question_words)):
        return True
    near = toks[max(0, i - 2): i + 3]
    return w in _MONTH_TOKENS or (w.isdigit() and int(w) <= 31 and any(t.text in _MONTH_TOKENS for t in near))


def _negated(toks: Sequence[Token], lo: int, hi: int) -> bool:
    """A negation in the :data:`NEG_WINDOW` tokens before the match ("not Paris"), or "wrong"/"not" after it."""
    for i in range(lo - 1, max(-1, lo - 1 - NEG_WINDOW), -1):
        if toks[i].text in _SENTENCE_END:
            break
        if toks[i].text in NEGATIONS:
            return True
    for i in range(hi + 1, min(len(toks), hi + 1 + NEG_WINDOW)):
        if toks[i].text in _SENTENCE_END:
            break
        if toks[i].text in _WRONG_AFTER:
            return True
    return False


def _phrase_start(toks: Sequence[Token], lo: int, gold: _Gold) -> int:
    """Where the gold's own wording, said again before the match, begins: "Not *the capital of Italy is* Rome"
    for the gold "The capital of Italy is Rome." (its evidence is "Rome" alone), so that a negation before the
    repeated phrase is within the negation window of what it denies."""
    i = lo
    while i > 0 and toks[i - 1].kind != "sep" and toks[i - 1].text not in NEGATIONS and _in(toks[i - 1].text,
                                                                                             gold.words):
        i -= 1
    return i


def _neighbour_rival(toks: Sequence[Token], lo: int, hi: int, gold: _Gold, question_words: Sequence[str],
                     others: frozenset[str]) -> bool:
    """The word beside the match on either side names another candidate.

    In a bare answer (a name, a list: fewer than two stop words) the nearest word across marks and stop words, any
    word ("Lyon Paris", "Lyon. Paris", "Paris rome", and "Alan Turing" for "Turing" too: a first name and a rival
    read alike; so "Jane Doe won it" is refused as well: a verb and a rival read alike without more stop words). In
    a sentence the word right beside it, only if it is written with a capital ("… is Lyon Paris", "Lyon Paris is
    it."), since verbs and adjectives stand next to answers. Where case tells nothing (all lower or
    all upper case), any word. Titles, kinds of thing, places, chatter, the question's and the golds' words are no
    rival (:func:`_explained`)."""
    n = len(toks)
    words = [i for i, t in enumerate(toks) if t.kind != "sep"]
    cased = any(t.upper for t in toks) and any(t.kind == "w" and not t.upper for t in toks)
    bare = sum(1 for i in words if toks[i].text in STOP_WORDS) < 2
    for i0, step in ((lo - 1, -1), (hi + 1, 1)):
        i, chatter = i0, False
        # chatter or the match said again between two names joins them as a bare pair would ("Paris I think
        # Lyon", "Lyon is the answer Paris", "Paris Paris Lyon"): once one is crossed, marks and stop words are too
        # (the gold's words one by one are not crossed: "New York City. … the City" is no repetition)
        while 0 <= i < n:
            again = _repeats(toks, lo, hi, i, step)
            if again:
                i, chatter = i + again * step, True
            elif (bare or not cased or chatter) and (toks[i].text in STOP_WORDS or toks[i].kind == "sep") \
                    or toks[i].text in CHATTER:
                chatter = chatter or toks[i].text in CHATTER
                i += step
            else:
                break
        if not 0 <= i < n or toks[i].kind == "sep" or _explained(toks, i, lo, hi, gold, question_words, others):
            continue
        if toks[i].kind == "w" and not bare and cased and not chatter and all(
                e[0].isdigit() or e in _MONTH_TOKENS for e in gold.evidence):
            continue  # in a sentence a word beside a number gold is what it counts ("the 1960 Summer Olympics", "336 AD")
        if bare or not cased or toks[i].upper:
            return True
    return cased and _sentence_rival(toks, lo, hi, gold, question_words, others)


def _repeats(toks: Sequence[Token], lo: int, hi: int, i: int, step: int) -> int:
    """The match's length if the match's words stand again from ``i`` (walking by ``step``), else 0."""
    size = hi - lo + 1
    j = i if step > 0 else i - size + 1
    if j < 0 or j + size > len(toks):
        return 0
    return size if all(toks[j + k].text == toks[lo + k].text for k in range(size)) else 0


def _sentence_rival(toks: Sequence[Token], lo: int, hi: int, gold: _Gold, question_words: Sequence[str],
                    others: frozenset[str]) -> bool:
    """The match's sentence claims nothing else ("The answer is Paris!") and a short sentence beside it (at most
    ``ITEM_MAX`` + 3 words: a claim, not an explanation) names another candidate: a bare one ("Lyon!", no stop
    word) or a capitalized one after its first word ("The answer is Lyon. Paris"). Two claims side by side."""
    n = len(toks)  # a new line is no sentence end here: line lists are the list check's ("Saddle Up\nEvermoist")
    a, b = lo, hi
    while a > 0 and toks[a - 1].text not in _CLAIM_END:
        a -= 1
    while b + 1 < n and toks[b + 1].text not in _CLAIM_END:
        b += 1
    if any(toks[i].kind != "sep" and not _explained(toks, i, lo, hi, gold, question_words, others)
           for i in range(a, b + 1)):
        return False  # the match's sentence says more than the match
    for start, step in ((a - 1, -1), (b + 1, 1)):
        i, seen = start + step, []
        while 0 <= i < n and toks[i].text in _CLAIM_END:  # "Rome.. Milan", "Rome?! Milan": one claim's end
            i += step
        while 0 <= i < n and toks[i].text not in _CLAIM_END:
            if toks[i].kind != "sep":
                seen.append(i)
            i += step
        if not seen or len(seen) > ITEM_MAX + 3:
            continue
        first = min(seen)
        content = [i for i in seen if not _explained(toks, i, lo, hi, gold, question_words, others)
                   and (toks[i].kind == "w" or gold.numeric)]
        if any(toks[i].text in STOP_WORDS for i in seen):
            if any(i != first and toks[i].upper for i in content):
                return True
        elif content:
            return True
    return False

def _alternative(toks: Sequence[Token], lo: int, hi: int, gold: _Gold, question_words: Sequence[str],
                 others: frozenset[str] = frozenset()) -> bool:
    """A hedge or an alternative ("or", "maybe", "/") within :data:`ALT_WINDOW` tokens of the match, or anywhere in
    a short answer (at most :data:`SHORT_EXTRA` content words beyond the gold and the question); the gold's own
    "or" and the question's are no alternative."""
    extra = sum(1 for t in toks if t.kind != "sep" and t.text not in STOP_WORDS and not _in(t.text, gold.words)
                and (gold.echoed or not _in(t.text, question_words)))
    short = extra <= SHORT_EXTRA
    for i, t in enumerate(toks):
        if lo <= i <= hi or t.text in gold.words or (not gold.echoed and t.text in question_words):
            continue
        if (short or lo - ALT_WINDOW <= i <= hi + ALT_WINDOW) and (
                t.text in ALTERNATIVES or t.text in HEDGES or (t.kind == "sep" and t.text in "/|")):
            if t.text not in HEDGES and _between_golds(toks, i, gold, others):
                continue  # "Hellenism or Hellenic polytheism": two accepted answers offered
            return True
    return False


def _between_golds(toks: Sequence[Token], i: int, gold: _Gold, others: frozenset[str]) -> bool:
    """The content words on both sides of the mark at ``i`` (up to the next mark) all belong to a gold alias."""
    def side(step: int) -> list[str]:
        out, j = [], i + step
        while 0 <= j < len(toks) and toks[j].kind != "sep" and toks[j].text not in ALTERNATIVES:
            if toks[j].text not in STOP_WORDS:
                out.append(toks[j].text)
            j += step
        return out
    accepted = others | frozenset(gold.words)
    return all(w and all(x in accepted for x in w) for w in (side(-1), side(1)))


def _rivals(item: Sequence[str], question_words: Sequence[str], others: frozenset[str]) -> list[str]:
    """The item's words that could name a rival answer: no stop word, title, other gold's word or question word."""
    return [w for w in item if w not in STOP_WORDS and w not in TITLES and w not in others
            and not _in(w, question_words)]


def _names_rival(toks: Sequence[Token], sep: int, step: int, rivals: Sequence[str], first_too: bool = False) -> bool:
    """The item past the mark at ``sep`` holds a capitalized rival word, in cased text; after the mark (``step`` >
    0) its first word, capitalized at a sentence start, counts only with ``first_too``."""
    if not any(t.kind == "w" and not t.upper for t in toks):
        return False  # all capitals or all lower case: no names to read
    words = [i for i in _item_at(toks, sep, step) if toks[i].kind == "w"]
    skip = words[0] if words and step > 0 and not first_too else -1
    return any(i != skip and toks[i].upper and toks[i].text in rivals for i in words)


def _article_name(toks: Sequence[Token], sep: int, step: int) -> bool:
    """The item past the mark at ``sep`` is an article and a capitalized name ("the Seine", "the Beatles"), in
    cased text: a candidate like a bare name, not a clause (issue 51's hedges: "the Rhone, the Seine, Berlin")."""
    if not any(t.kind == "w" and not t.upper for t in toks):
        return False
    words = [i for i in _item_at(toks, sep, step) if toks[i].kind == "w"]
    return len(words) >= 2 and toks[words[0]].text in ("the", "a", "an") and all(toks[i].upper for i in words[1:])


def _list_rival(toks: Sequence[Token], lo: int, hi: int, gold: _Gold, question_words: Sequence[str],
                others: frozenset[str]) -> bool:
    """The match is an item of a list (split by "," ";" "&" "+" "and" or a new line) whose next item holds a
    candidate of the same kind: 1–:data:`ITEM_MAX` content words beyond the question, the golds and titles (a
    longer item is a clause), not a date's month and day, a number beside a number or a word beside a word."""
    n = len(toks)
    left = lo
    while left > 0 and not (_list_mark(toks[left - 1]) or toks[left - 1].text in _SENTENCE_END):
        left -= 1
    right = hi
    while right + 1 < n and not (_list_mark(toks[right + 1]) or toks[right + 1].text in _SENTENCE_END):
        right += 1
    if hi + 1 < n and toks[hi + 1].upper and len(toks[hi + 1].text) > 1 and toks[hi + 1].text in _CLAUSE_START \
            and _names_rival(toks, hi, 1, _rivals(_item(toks, hi, 1), question_words, others)):
        return True  # "Paris The answer is Lyon": a capitalized clause start with no mark begins a new item
    for sep, step in ((lo - 1, -1), (hi + 1, 1)):
        if 0 <= sep < n and toks[sep].text in _DASHES and toks[sep].spaced and \
                _names_rival(toks, sep, step, _rivals(_item(toks, sep, step), question_words, others), True):
            return True  # "The answer is Paris - Lyon": a dash right at the match joins a name to it
    if right - left + 1 > len(gold.words) + 2:
        return False  # the match sits in a clause, not in a list of names
    for sep in (left - 1, right + 1):
        if not 0 <= sep < n:
            continue
        item = _item(toks, sep, -1 if sep < left else 1)
        rivals = _rivals(item, question_words, others)
        if not item or not rivals:
            continue
        if item[0] in _CLAUSE_START and not _article_name(toks, sep, -1 if sep < left else 1):
            # a clause ("The answer is Lyon - Paris"): across a spaced dash or a bracket, a name in it is still a
            # rival; across "and" or a comma it is a partner ("sung by Kygo and Selena Gomez": 47 of 49 answers
            # flipped by that wider rule were judged correct by people on EVOUNA's dev folds)
            joins = toks[sep].text in _JOINS and (toks[sep].spaced or toks[sep].text not in _DASHES)
            if joins and _names_rival(toks, sep, -1 if sep < left else 1, rivals):
                return True
            continue
        if len(rivals) > ITEM_MAX or len(item) > ITEM_MAX + 1:
            continue  # in a long answer a long item is a clause
        if any(w in _MONTH_TOKENS for w in item):
            continue  # "September 2, 1945": a date refines a year
        if all(w[0].isdigit() for w in rivals) != gold.numeric:
            continue
        return True
    return False


#: the grader's defences, each a reason to refuse a covered gold; agreement (``alone=False``) applies only
#: "negation". A benchmark may switch one off to measure what it costs in agreement with people and what it buys
#: against the listing attacks (benchmarks/bench_judge_humans.py, "defences")
DEFENCES = ("negation", "neighbour", "alternative", "list")


def claims_alone(toks: Sequence[Token], lo: int, hi: int, gold: _Gold, question_words: Sequence[str],
                 alone: bool = True, others: frozenset[str] = frozenset(),
                 defences: Sequence[str] | None = None) -> bool:
    """No negation of the match at answer tokens ``lo..hi``, and (``alone``) no rival candidate beside it, no
    hedge or alternative near it, no rival item in its list (``defences``, default :data:`DEFENCES`). ``others``:
    the other golds' words, which name no rival."""
    on = DEFENCES if defences is None else defences
    start = _phrase_start(toks, lo, gold)
    if "negation" in on and (_negated(toks, lo, hi) or (start < lo and _negated(toks, start, hi))):
        return False
    if any(toks[i].text not in STOP_WORDS for i in range(start, lo)):
        lo = start  # the gold's wording said again, content words and all, is the claim the defences read
    if not alone:
        return True
    return not (("neighbour" in on and _neighbour_rival(toks, lo, hi, gold, question_words, others))
                or ("alternative" in on and _alternative(toks, lo, hi, gold, question_words, others))
                or ("list" in on and _list_rival(toks, lo, hi, gold, question_words, others)))


def _conflict(toks: Sequence[Token], got: dict[int, int], gold: _Gold, question_words: Sequence[str]) -> bool:
    """A missing gold word whose place, next to a matched neighbour, holds another content word."""
    ev = gold.evidence
    for j in range(len(ev)):
        if j in got:
            continue
        for dj, side in ((1, -1), (-1, 1)):
            if j + dj not in got:
                continue
            i = got[j + dj] + side
            if not 0 <= i < len(toks) or toks[i].kind == "sep":
                continue
            w = toks[i].text
            if (len(w) > 1 and w not in STOP_WORDS and w not in TITLES and w not in KINDS
                    and not _in(w, question_words) and not _in(w, gold.words)):
                return True
    return False


def _date(words: Sequence[str]) -> tuple[str | None, str | None, str] | None:
    """(month, day, year) when a gold's words are one date: a year (4 digits), a month, a day (≤ 31), in any
    order, month and day optional ("September 4, 2000", "4 Sep 2000", "October 1976", "in 1990"); else None."""
    rest = [w for w in words if w not in STOP_WORDS]
    years = [w for w in rest if w.isdigit() and len(w) == 4]
    months = [w for w in rest if w in _MONTH_TOKENS]
    days = [w for w in rest if w.isdigit() and len(w) <= 2 and 1 <= int(w) <= 31]
    if len(years) != 1 or len(months) > 1 or len(days) > 1 or len(rest) != 1 + len(months) + len(days):
        return None
    return (months[0] if months else None), (days[0] if days else None), years[0]


def _covers_date(toks: Sequence[Token], date: tuple[str | None, str | None, str]) -> int | None:
    """The position of the gold date's year in the answer where no other month or day stands beside it (within
    three tokens, inside the sentence): "in 2000" and "September 2000" cover "September 4, 2000", a less precise
    but consistent date; "May 2000" and "5 September 2000" do not."""
    month, day, year = date
    for i, t in enumerate(toks):
        if t.text != year:
            continue
        ok = True
        for j in range(max(0, i - 3), min(len(toks), i + 4)):
            w = toks[j].text
            if j != i and w in _SENTENCE_END and (j > i):
                break
            if (w in _MONTH_TOKENS and w != month) or (
                    toks[j].kind == "n" and len(w) <= 2 and 1 <= int(w) <= 31 and w != day):
                ok = False
        if ok:
            return i
    return None


def _glued_match(t: Token, e: str) -> bool:
    """A capitalized word of a glued text that is the gold word with a function word stuck on ("Nelsonin")."""
    return t.glued and len(e) >= 3 and t.text.startswith(e) and t.text[len(e):] in _GLUE


def covers(answer_tokens: Sequence[Token], gold: str, question_words: Sequence[str], alone: bool = True,
           others: frozenset[str] = frozenset(), defences: Sequence[str] | None = None) -> bool:
    """Does the answer (read by :func:`tokens`) cover ``gold`` without negating it, and (``alone``, the grader's
    reading) claim nothing beside it (module docstring)? ``alone=False`` is the agreement's reading: an answer
    padded, hedged or listed beside others still makes the claim it covers. ``defences``: the checks applied
    (default :data:`DEFENCES`; :func:`semcal_eval.qa.grading.cover_refusal` asks which one refused)."""
    g = _read_gold(gold, question_words, alone)
    if g is None:
        return False
    ev = g.evidence
    # the head: the last evidence word, a place or title that qualifies it aside ("Dhaka, Bangladesh", "… Jnr")
    last = max((j for j, e in enumerate(ev) if e not in PLACES and e not in TITLES and e not in KINDS),
               default=len(ev) - 1)
    hits = []
    for i, t in enumerate(answer_tokens):
        if t.kind == "sep":
            continue
        for j, e in enumerate(ev):
            if words_match(t.text, e) or _glued_match(t, e) or (
                    len(t.text) == 1 and t.kind == "w" and t.text not in STOP_WORDS and j < last and len(e) > 1
                    and e[0] == t.text):
                hits.append((i, j))  # an initial stands for a first name: "B. Obama"
    if not hits:
        return False
    if g.echoed:
        rest = [t.text for t in answer_tokens if t.kind != "sep" and t.text not in STOP_WORDS
                and not _in(t.text, g.words)]
        if rest and all(_in(w, question_words) for w in rest):
            return False  # the gold is in the question, and the answer only restates the question
    got = _best_window(hits, len(ev), len(g.words) + WINDOW)
    if any(j not in got for j, e in enumerate(ev) if e in g.keys):
        # a date gold answered with its year (and month): people accept the less precise date
        date = _date(g.words)
        at = _covers_date(answer_tokens, date) if date else None
        return at is not None and claims_alone(answer_tokens, at, at, g, question_words, alone, others, defences)
    share = len(got) / len(ev)
    if g.sentence:
        if share < THETA_SENTENCE:
            return False
    elif share < 1:
        if g.listy or share < THETA or last not in got or _conflict(answer_tokens, got, g, question_words):
            return False
    return claims_alone(answer_tokens, min(got.values()), max(got.values()), g, question_words, alone, others,
                        defences)
