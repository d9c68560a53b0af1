#!/usr/bin/env python3
"""Generate crftk's synthetic demo chunking corpus: data/demo.train and data/demo.test.

The corpus is made by a small probabilistic grammar written for crftk (no
sentence, word list or annotation is taken from any other corpus).  Each
token line has three space-separated columns, as in CoNLL-2000:

    word  part-of-speech tag (Penn-style)  chunk tag (IOB2)

with a blank line after every sentence.  Chunk types: NP, VP, PP, ADJP,
ADVP, SBAR and PRT; punctuation and conjunctions between chunks are O.

What keeps the task from being trivial:

* ambiguous words: many words are nouns in a noun phrase and verbs in a verb
  phrase ("plan", "plans"), "that" is a determiner or opens a subordinate
  clause, "to" is a preposition or the infinitive marker, "up"/"down"/"out"
  are particles or prepositions, gerunds are verbs or noun modifiers;
* bracketing choices that the tags alone do not settle: noun compounds
  ("the oil company") against two bare noun phrases in a row ("gave
  children books"), coordination inside a noun phrase against coordination
  of phrases, adverbs inside a verb group against adverb phrases;
* noisy part-of-speech tags: a few percent of the tags are replaced by a
  plausible wrong tag, as an automatic tagger would;
* rare words: heads are sometimes drawn from large pools of invented words,
  so the test file has many words never seen in training.

Only the standard library is used and the random generator has a fixed
seed: running the script twice writes byte-identical files. Columns are
separated by tabs (CoNLL readers take any whitespace): an English-like grammar
inevitably produces some common three-token runs (". . O / It PRP B-NP / does
VBZ B-VP") that also occur in the real corpora, and with tabs no line of the
demo files can ever be mistaken for a copied line of the space-separated
CoNLL files.

Usage: python data/make_demo_corpus.py [OUTPUT_DIR]   (default: this directory)
"""

import os
import random
import sys

SEED = 20240611
N_TRAIN = 1500
N_TEST = 300

# Rates (probabilities per opportunity).
RARE_RATE = 0.14        # a content word is drawn from the invented-word pools
POS_NOISE = 0.07        # a tag is replaced by a confusable one
AMBIGUOUS_NOISE = 0.20  # a noun/verb word gets the tag of its other reading
RARE_NOISE = 0.30       # a tag of an invented (rare) word is replaced
MAX_DEPTH = 1           # nesting of subordinate clauses

# ---------------------------------------------------------------------------
# lexicon

DETERMINERS_SG = ["the", "a", "this", "that", "every", "each", "another", "no", "any"]
DETERMINERS_PL = ["the", "these", "those", "some", "many", "all", "both", "several", "no", "few"]
POSSESSIVES = ["his", "her", "its", "their", "our", "my", "your"]
SUBJECT_PRONOUNS = [("he", "sg3"), ("she", "sg3"), ("it", "sg3"), ("they", "pl"),
                    ("we", "pl"), ("you", "pl")]
OBJECT_PRONOUNS = ["him", "her", "it", "them", "us", "me", "you"]
NUMBER_WORDS = ["two", "three", "four", "five", "six", "ten", "twelve", "twenty", "hundred"]

# Nouns that are only nouns: (singular, plural).
NOUNS = [
    ("company", "companies"), ("market", "markets"), ("price", "prices"), ("bank", "banks"),
    ("city", "cities"), ("river", "rivers"), ("teacher", "teachers"), ("child", "children"),
    ("student", "students"), ("farmer", "farmers"), ("house", "houses"), ("road", "roads"),
    ("bridge", "bridges"), ("window", "windows"), ("garden", "gardens"), ("village", "villages"),
    ("doctor", "doctors"), ("letter", "letters"), ("morning", "mornings"), ("year", "years"),
    ("week", "weeks"), ("day", "days"), ("month", "months"), ("island", "islands"),
    ("machine", "machines"), ("engine", "engines"), ("computer", "computers"),
    ("government", "governments"), ("official", "officials"), ("manager", "managers"),
    ("worker", "workers"), ("family", "families"), ("friend", "friends"), ("story", "stories"),
    ("idea", "ideas"), ("problem", "problems"), ("question", "questions"), ("school", "schools"),
    ("office", "offices"), ("car", "cars"), ("train", "trains"), ("boat", "boats"),
    ("horse", "horses"), ("dog", "dogs"), ("cat", "cats"), ("bird", "birds"), ("tree", "trees"),
    ("apple", "apples"), ("bread", "breads"), ("oil", "oils"), ("water", "waters"),
    ("stone", "stones"), ("table", "tables"), ("chair", "chairs"), ("door", "doors"),
    ("country", "countries"), ("law", "laws"), ("court", "courts"), ("judge", "judges"),
    ("share", "shares"), ("stock", "stocks"), ("profit", "profits"), ("loss", "losses"),
    ("investor", "investors"), ("analyst", "analysts"), ("factory", "factories"),
    ("product", "products"), ("customer", "customers"), ("contract", "contracts"),
    ("meeting", "meetings"), ("budget", "budgets"), ("tax", "taxes"), ("rate", "rates"),
    ("festival", "festivals"), ("museum", "museums"), ("painting", "paintings"),
    ("song", "songs"), ("film", "films"), ("player", "players"), ("team", "teams"),
    ("game", "games"), ("season", "seasons"), ("winter", "winters"), ("summer", "summers"),
    ("harbor", "harbors"), ("valley", "valleys"), ("mountain", "mountains"), ("forest", "forests"),
    ("lantern", "lanterns"), ("kettle", "kettles"), ("blanket", "blankets"), ("ladder", "ladders"),
    ("merchant", "merchants"), ("sailor", "sailors"), ("baker", "bakers"), ("miller", "millers"),
    ("council", "councils"), ("mayor", "mayors"), ("record", "records"), ("system", "systems"),
    ("network", "networks"), ("program", "programs"), ("device", "devices"), ("signal", "signals"),
    ("wheel", "wheels"), ("barrel", "barrels"), ("basket", "baskets"), ("coin", "coins"),
]

# Words that are nouns or verbs: noun (sg, pl) and verb (base, 3sg, past, participle, gerund).
NOUN_VERBS = [
    ("plan", "plans", "plan", "plans", "planned", "planned", "planning"),
    ("run", "runs", "run", "runs", "ran", "run", "running"),
    ("walk", "walks", "walk", "walks", "walked", "walked", "walking"),
    ("watch", "watches", "watch", "watches", "watched", "watched", "watching"),
    ("work", "works", "work", "works", "worked", "worked", "working"),
    ("change", "changes", "change", "changes", "changed", "changed", "changing"),
    ("report", "reports", "report", "reports", "reported", "reported", "reporting"),
    ("need", "needs", "need", "needs", "needed", "needed", "needing"),
    ("call", "calls", "call", "calls", "called", "called", "calling"),
    ("book", "books", "book", "books", "booked", "booked", "booking"),
    ("show", "shows", "show", "shows", "showed", "shown", "showing"),
    ("answer", "answers", "answer", "answers", "answered", "answered", "answering"),
    ("trade", "trades", "trade", "trades", "traded", "traded", "trading"),
    ("order", "orders", "order", "orders", "ordered", "ordered", "ordering"),
    ("promise", "promises", "promise", "promises", "promised", "promised", "promising"),
    ("light", "lights", "light", "lights", "lit", "lit", "lighting"),
    ("claim", "claims", "claim", "claims", "claimed", "claimed", "claiming"),
    ("fish", "fish", "fish", "fishes", "fished", "fished", "fishing"),
    ("sale", "sales", "sell", "sells", "sold", "sold", "selling"),   # noun/verb pair, not the same word
    ("offer", "offers", "offer", "offers", "offered", "offered", "offering"),
    ("visit", "visits", "visit", "visits", "visited", "visited", "visiting"),
    ("drive", "drives", "drive", "drives", "drove", "driven", "driving"),
    ("cook", "cooks", "cook", "cooks", "cooked", "cooked", "cooking"),
    ("paint", "paints", "paint", "paints", "painted", "painted", "painting"),
    ("rise", "rises", "rise", "rises", "rose", "risen", "rising"),
    ("fall", "falls", "fall", "falls", "fell", "fallen", "falling"),
    ("cost", "costs", "cost", "costs", "cost", "cost", "costing"),
    ("control", "controls", "control", "controls", "controlled", "controlled", "controlling"),
]

# Verbs: (base, 3sg, past, participle, gerund, frames).  Frames: intr, tr, ditr, say, inf,
# and phr:PARTICLE for phrasal verbs.
VERBS = [
    ("see", "sees", "saw", "seen", "seeing", "tr say"),
    ("find", "finds", "found", "found", "finding", "tr say"),
    ("give", "gives", "gave", "given", "giving", "ditr tr phr:up"),
    ("send", "sends", "sent", "sent", "sending", "ditr tr"),
    ("bring", "brings", "brought", "brought", "bringing", "ditr tr phr:back"),
    ("buy", "buys", "bought", "bought", "buying", "tr ditr phr:out"),
    ("take", "takes", "took", "taken", "taking", "tr phr:over phr:off"),
    ("make", "makes", "made", "made", "making", "tr"),
    ("build", "builds", "built", "built", "building", "tr phr:up"),
    ("carry", "carries", "carried", "carried", "carrying", "tr phr:out"),
    ("open", "opens", "opened", "opened", "opening", "tr intr"),
    ("close", "closes", "closed", "closed", "closing", "tr intr phr:down"),
    ("say", "says", "said", "said", "saying", "say"),
    ("think", "thinks", "thought", "thought", "thinking", "say"),
    ("believe", "believes", "believed", "believed", "believing", "say tr"),
    ("know", "knows", "knew", "known", "knowing", "say tr"),
    ("expect", "expects", "expected", "expected", "expecting", "say tr inf"),
    ("want", "wants", "wanted", "wanted", "wanting", "tr inf"),
    ("try", "tries", "tried", "tried", "trying", "inf tr"),
    ("hope", "hopes", "hoped", "hoped", "hoping", "inf say"),
    ("decide", "decides", "decided", "decided", "deciding", "inf say"),
    ("arrive", "arrives", "arrived", "arrived", "arriving", "intr"),
    ("sleep", "sleeps", "slept", "slept", "sleeping", "intr"),
    ("wait", "waits", "waited", "waited", "waiting", "intr"),
    ("laugh", "laughs", "laughed", "laughed", "laughing", "intr"),
    ("grow", "grows", "grew", "grown", "growing", "intr tr phr:up"),
    ("leave", "leaves", "left", "left", "leaving", "tr intr"),
    ("pick", "picks", "picked", "picked", "picking", "phr:up tr"),
    ("turn", "turns", "turned", "turned", "turning", "phr:down phr:off intr"),
    ("set", "sets", "set", "set", "setting", "phr:up tr"),
    ("write", "writes", "wrote", "written", "writing", "tr ditr phr:down"),
    ("read", "reads", "read", "read", "reading", "tr intr"),
    ("hold", "holds", "held", "held", "holding", "tr phr:up"),
    ("lose", "loses", "lost", "lost", "losing", "tr"),
    ("win", "wins", "won", "won", "winning", "tr intr"),
    ("pay", "pays", "paid", "paid", "paying", "tr ditr phr:off"),
    ("tell", "tells", "told", "told", "telling", "ditr"),
    ("move", "moves", "moved", "moved", "moving", "intr tr"),
    ("study", "studies", "studied", "studied", "studying", "tr intr"),
    ("seem", "seems", "seemed", "seemed", "seeming", "cop"),
    ("become", "becomes", "became", "become", "becoming", "cop"),
    ("remain", "remains", "remained", "remained", "remaining", "cop intr"),
]

ADJECTIVES = [
    "big", "small", "old", "new", "young", "red", "green", "blue", "dark", "bright", "quiet",
    "loud", "happy", "sad", "strong", "weak", "cheap", "expensive", "early", "late", "long",
    "short", "warm", "cold", "heavy", "light", "rich", "poor", "busy", "empty", "full", "simple",
    "difficult", "important", "local", "foreign", "national", "public", "private", "modern",
    "ancient", "careful", "famous", "strange", "wooden", "golden", "narrow", "wide", "fresh",
    "major", "recent", "final", "free", "clever", "brave", "gentle", "tired", "ready",
]
COMPARATIVES = [("bigger", "JJR"), ("smaller", "JJR"), ("older", "JJR"), ("cheaper", "JJR"),
                ("largest", "JJS"), ("best", "JJS"), ("oldest", "JJS"), ("newest", "JJS")]
DEGREE_ADVERBS = ["very", "quite", "rather", "too", "so", "extremely", "fairly", "really"]
VERB_ADVERBS = ["quickly", "slowly", "carefully", "quietly", "suddenly", "finally", "often",
                "never", "always", "already", "also", "still", "just", "rarely", "gladly"]
CLAUSE_ADVERBS = ["however", "yesterday", "today", "perhaps", "meanwhile", "later", "now",
                  "then", "again", "soon", "here", "there", "together", "abroad"]
PREPOSITIONS = ["in", "on", "at", "with", "from", "by", "for", "of", "near", "under", "over",
                "after", "before", "during", "without", "into", "across", "behind", "about",
                "through", "against", "among", "since", "like"]
PARTICLE_PREPS = ["up", "down", "out", "off", "over", "back"]   # IN before an NP, RP after a verb
SUBORDINATORS = [("that", "IN"), ("because", "IN"), ("although", "IN"), ("if", "IN"),
                 ("while", "IN"), ("when", "WRB"), ("whether", "IN"), ("since", "IN")]
COORDINATORS = ["and", "but", "or"]
MODALS = ["will", "would", "can", "could", "may", "might", "should", "must"]
TITLES = ["mr.", "mrs.", "dr.", "ms.", "prof."]
NAMES = [
    "Alder", "Brenn", "Corvi", "Dalmont", "Esker", "Farrow", "Galen", "Hollis", "Istra", "Jorvik",
    "Kell", "Lorn", "Marden", "Nyla", "Oskar", "Pell", "Quill", "Roswen", "Sable", "Tamsin",
    "Ulric", "Vesna", "Wren", "Yarrow", "Zeno", "Ardent", "Bellweather", "Castor", "Delphine",
    "Everard", "Northgate", "Eastmoor", "Kestrel", "Harrowfield", "Millbrook", "Stonebridge",
]
ORG_WORDS = ["Corp.", "Inc.", "Bank", "Group", "Industries", "Partners", "Holdings", "Co."]

# ---------------------------------------------------------------------------
# invented rare words

ONSETS = ["b", "br", "d", "dr", "f", "fl", "g", "gr", "h", "k", "l", "m", "n", "p", "pl", "qu",
          "r", "s", "sk", "sl", "st", "t", "tr", "v", "w", "z", "ch", "sh", "th", "bl", "cr"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "oo", "ou", "ie"]
CODAS = ["", "", "", "n", "m", "r", "l", "s", "t", "nd", "rt", "sk", "ck", "x", "mb", "ng"]


def invent(rng, syllables):
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                   for _ in range(syllables))


def make_pool(rng, size, suffixes, taken):
    pool = []
    while len(pool) < size:
        w = invent(rng, rng.choice((1, 2, 2))) + rng.choice(suffixes)
        if w not in taken:
            taken.add(w)
            pool.append(w)
    return pool


def pluralize(w):
    if w.endswith(("s", "x", "ch", "sh")):
        return w + "es"
    if w.endswith("y") and w[-2:-1] not in "aeiou":
        return w[:-1] + "ies"
    return w + "s"


def verb_forms(base):
    if base.endswith("e"):
        return base, base + "s", base + "d", base + "d", base[:-1] + "ing"
    return base, pluralize(base), base + "ed", base + "ed", base + "ing"


def known_words():
    """Every word of the hand-written lexicon (invented words must differ from them)."""
    words = DETERMINERS_SG + DETERMINERS_PL + POSSESSIVES + OBJECT_PRONOUNS + NUMBER_WORDS
    words += [w for w, _ in SUBJECT_PRONOUNS] + [w for w, _ in COMPARATIVES]
    words += [w for pair in NOUNS for w in pair] + [w for nv in NOUN_VERBS for w in nv]
    words += [w for v in VERBS for w in v[:5]] + ADJECTIVES + DEGREE_ADVERBS + VERB_ADVERBS
    words += CLAUSE_ADVERBS + PREPOSITIONS + PARTICLE_PREPS + [w for w, _ in SUBORDINATORS]
    words += COORDINATORS + MODALS + TITLES + [w.lower() for w in NAMES + ORG_WORDS]
    return words


class Lexicon:
    def __init__(self, rng):
        taken = set(known_words())
        self.rare_nouns = [(w, pluralize(w)) for w in
                           make_pool(rng, 3000, ["", "", "ment", "ery", "ick", "ion", "er"], taken)]
        self.rare_adjs = make_pool(rng, 800, ["ish", "ous", "al", "ic", "y", "ive", "ful"], taken)
        self.rare_names = [w.capitalize() for w in
                           make_pool(rng, 2000, ["", "", "son", "ford", "ia", "ov", "ez"], taken)]
        self.rare_verbs = [verb_forms(w) + ("tr intr",) for w in
                           make_pool(rng, 600, ["", "ate", "ize", "en"], taken)]
        self.rare_words = set(self.rare_adjs) | {w.lower() for w in self.rare_names}
        self.rare_words |= {w for pair in self.rare_nouns for w in pair}
        self.rare_words |= {w for v in self.rare_verbs for w in v[:5]}
        self.noun_verb_words = {w for nv in NOUN_VERBS for w in nv}
        self.nouns = NOUNS + [(nv[0], nv[1]) for nv in NOUN_VERBS]
        self.verbs = VERBS + [nv[2:] + ("tr intr",) for nv in NOUN_VERBS]


# ---------------------------------------------------------------------------
# noisy tags: what an automatic tagger might confuse a tag with

CONFUSIONS = {
    "NN": ["VB", "JJ", "VBP", "NNP"], "NNS": ["VBZ", "NN"], "NNP": ["NN", "JJ", "NNPS"],
    "VB": ["NN", "VBP"], "VBP": ["VB", "NN"], "VBZ": ["NNS"], "VBD": ["VBN", "JJ"],
    "VBN": ["VBD", "JJ"], "VBG": ["NN", "JJ"], "JJ": ["NN", "VBN", "RB"], "RB": ["IN", "JJ", "RP"],
    "IN": ["RB", "RP", "WDT"], "RP": ["IN", "RB"], "DT": ["IN", "WDT", "PDT"], "CD": ["NN", "JJ"],
    "JJR": ["RBR"], "TO": ["IN"],
}


# ---------------------------------------------------------------------------
# the grammar.  A sentence is a list of chunks: (type or None for O tokens, [(word, tag)...]).

class Grammar:
    def __init__(self, rng, lex):
        self.rng = rng
        self.lex = lex

    def p(self, prob):
        return self.rng.random() < prob

    def choice(self, seq):
        return self.rng.choice(seq)

    # --- words -------------------------------------------------------------
    def noun(self, plural):
        pair = self.choice(self.lex.rare_nouns) if self.p(RARE_RATE) else self.choice(self.lex.nouns)
        return (pair[1], "NNS") if plural else (pair[0], "NN")

    def adjective(self):
        if self.p(RARE_RATE):
            return self.choice(self.lex.rare_adjs), "JJ"
        if self.p(0.08):
            return self.choice(COMPARATIVES)
        return self.choice(ADJECTIVES), "JJ"

    def name(self):
        if self.p(2 * RARE_RATE):
            return self.choice(self.lex.rare_names), "NNP"
        return self.choice(NAMES), "NNP"

    def number(self):
        r = self.rng.random()
        if r < 0.4:
            return str(self.rng.randint(2, 99)), "CD"
        if r < 0.6:
            return f"{self.rng.randint(1, 9)},{self.rng.randint(0, 999):03d}", "CD"
        if r < 0.75:
            return f"{self.rng.randint(1, 20)}.{self.rng.randint(1, 9)}", "CD"
        return self.choice(NUMBER_WORDS), "CD"

    def verb(self, frame=None):
        pool = self.lex.verbs
        if self.p(RARE_RATE / 2):
            pool = self.lex.rare_verbs
        for _ in range(50):
            v = self.choice(pool)
            if frame is None or frame in v[5].split():
                return v
        return self.choice([v for v in self.lex.verbs if frame in v[5].split()])

    # --- noun phrases -----------------------------------------------------
    def np(self, role="subj", allow_pp=True, depth=0):
        """Chunks of a noun phrase and its agreement ("sg3" or "pl")."""
        r = self.rng.random()
        if r < 0.2:
            if role == "subj":
                w, agr = self.choice(SUBJECT_PRONOUNS)
            else:
                w, agr = self.choice(OBJECT_PRONOUNS), "sg3"
            return [("NP", [(w, "PRP")])], agr
        if r < 0.31:
            toks = []
            if self.p(0.25):
                toks.append((self.choice(TITLES).capitalize(), "NNP"))
            toks.append(self.name())
            if self.p(0.15):
                toks.append(self.name())
            if self.p(0.15):
                toks.append((self.choice(ORG_WORDS), "NNP"))
            chunks = [("NP", toks)]
            if self.p(0.2):   # possessive: [NP Brenn] [NP 's old house]
                head, agr = self.nominal(self.p(0.4))
                chunks.append(("NP", [("'s", "POS")] + head))
                return chunks, agr
            return chunks, "sg3"
        if r < 0.35 and role != "subj":
            # a "that" pronoun or demonstrative alone
            return [("NP", [(self.choice(["this", "that", "these", "those"]), "DT")])], "sg3"
        plural = self.p(0.4)
        toks = []
        d = self.rng.random()
        if d < 0.55:
            toks.append((self.choice(DETERMINERS_PL if plural else DETERMINERS_SG), "DT"))
        elif d < 0.7:
            toks.append((self.choice(POSSESSIVES), "PRP$"))
        elif d < 0.8 and plural:
            toks.append(self.number())
        elif d < 0.8:
            toks.append(("the", "DT"))
        # else: a bare noun phrase (plural or mass noun)
        if toks and toks[0][0] in ("a", "another", "every", "each") and plural:
            toks[0] = ("the", "DT")
        head, _ = self.nominal(plural)
        chunks = [("NP", toks + head)]
        if depth == 0 and self.p(0.08):
            plural = True
            if self.p(0.5):   # coordination inside the noun phrase: [NP the cats and dogs]
                more, _ = self.nominal(self.p(0.5))
                chunks[0][1].extend([(self.choice(["and", "or"]), "CC")] + more)
            else:             # coordination of noun phrases: [NP the cats] and [NP (the) dogs]
                chunks.append((None, [(self.choice(["and", "or"]), "CC")]))
                chunks.extend(self.np("obj", allow_pp=False, depth=depth + 1)[0])
                return chunks, "pl"
        if allow_pp and depth == 0 and self.p(0.07):
            chunks.extend(self.pp(depth + 1))
        return chunks, "pl" if plural else "sg3"

    def nominal(self, plural):
        """Pre-modifiers and head noun (no determiner)."""
        toks = []
        if self.p(0.24):
            if self.p(0.12):
                toks.append((self.choice(DEGREE_ADVERBS), "RB"))
            toks.append(self.adjective())
            if self.p(0.1):
                if self.p(0.3):
                    toks.append(("and", "CC"))
                toks.append(self.adjective())
        if self.p(0.05):
            v = self.verb()
            toks.append((v[4], "VBG"))        # "the running water"
        if self.p(0.12):                      # compound: "the oil company", "the sales office"
            toks.append(self.noun(self.p(0.15)))
        toks.append(self.noun(plural))
        return toks, "pl" if plural else "sg3"

    def pp(self, depth=0):
        r = self.rng.random()
        if r < 0.12:
            prep = ("to", "TO")
        elif r < 0.2:
            prep = (self.choice(PARTICLE_PREPS), "IN")
        else:
            prep = (self.choice(PREPOSITIONS), "IN")
        obj, _ = self.np("obj", allow_pp=False, depth=depth + 1)
        return [("PP", [prep])] + obj

    def adjp(self):
        toks = []
        if self.p(0.35):
            toks.append((self.choice(DEGREE_ADVERBS), "RB"))
        toks.append(self.adjective())
        chunks = [("ADJP", toks)]
        if self.p(0.12):
            chunks[0][1].extend([("and", "CC"), self.adjective()])
        return chunks

    # --- verb groups ------------------------------------------------------
    def verb_group(self, agr, v, tense=None):
        """Tokens of a verb group ending in verb v, agreeing with the subject."""
        tense = tense or self.choice(["past", "past", "pres", "pres", "modal", "perf", "prog", "neg"])
        adv = [(self.choice(VERB_ADVERBS), "RB")] if self.p(0.12) else []
        if tense == "past":
            return adv + [(v[2], "VBD")]
        if tense == "pres":
            return adv + ([(v[1], "VBZ")] if agr == "sg3" else [(v[0], "VBP")])
        if tense == "modal":
            return [(self.choice(MODALS), "MD")] + adv + [(v[0], "VB")]
        if tense == "perf":
            aux = ("has", "VBZ") if agr == "sg3" else ("have", "VBP")
            if self.p(0.3):
                aux = ("had", "VBD")
            return [aux] + adv + [(v[3], "VBN")]
        if tense == "prog":
            aux = ("is", "VBZ") if agr == "sg3" else ("are", "VBP")
            if self.p(0.4):
                aux = ("was", "VBD") if agr == "sg3" else ("were", "VBD")
            return [aux] + adv + [(v[4], "VBG")]
        aux = ("does", "VBZ") if agr == "sg3" else ("do", "VBP")
        if self.p(0.4):
            aux = ("did", "VBD")
        return [aux, ("not", "RB")] + adv + [(v[0], "VB")]

    def copula(self, agr):
        r = self.rng.random()
        if r < 0.6:
            if self.p(0.5):
                return [("is", "VBZ") if agr == "sg3" else ("are", "VBP")]
            return [("was", "VBD") if agr == "sg3" else ("were", "VBD")]
        if r < 0.75:
            return [(self.choice(MODALS), "MD"), ("be", "VB")]
        v = self.verb("cop")
        return self.verb_group(agr, v, self.choice(["past", "pres", "modal"]))

    # --- clauses ----------------------------------------------------------
    def clause(self, depth=0):
        chunks = []
        subj, agr = self.np("subj")
        chunks.extend(subj)
        r = self.rng.random()
        if r < 0.17:
            chunks.append(("VP", self.copula(agr)))
            if self.p(0.6):
                chunks.extend(self.adjp())
            else:
                chunks.extend(self.np("obj")[0])
            if self.p(0.2):
                chunks.extend(self.pp(depth))
            return chunks
        frames = ["tr", "tr", "tr", "tr", "intr", "intr", "intr", "ditr", "say", "inf", "phr"]
        if depth >= MAX_DEPTH:
            frames = ["tr", "tr", "intr", "ditr", "phr"]
        frame = self.choice(frames)
        if frame == "phr":
            v = self.verb_phrasal()
            particle = v[6]
        else:
            v = self.verb(frame)
        chunks.append(("VP", self.verb_group(agr, v)))
        if frame == "tr":
            chunks.extend(self.np("obj")[0])
        elif frame == "ditr":
            first, _ = self.np("obj", allow_pp=False)
            chunks.extend(first)
            chunks.extend(self.np("obj")[0])
        elif frame == "say":
            sub = self.choice([("that", "IN"), ("that", "IN"), ("whether", "IN"), ("if", "IN")])
            chunks.append(("SBAR", [sub]))
            chunks.extend(self.clause(depth + 1))
            return chunks
        elif frame == "inf":
            # "wants to build a bridge": one verb chunk, as in CoNLL-2000
            w = self.verb("tr")
            chunks[-1][1].extend([("to", "TO"), (w[0], "VB")])
            chunks.extend(self.np("obj")[0])
        elif frame == "phr":
            if self.p(0.5):
                chunks.append(("PRT", [(particle, "RP")]))
                chunks.extend(self.np("obj")[0])
            else:   # "picked the box up"
                chunks.extend(self.np("obj", allow_pp=False)[0])
                chunks.append(("PRT", [(particle, "RP")]))
        n_pp = self.choice([0, 0, 0, 0, 0, 0, 1, 1, 1, 2])
        for _ in range(n_pp):
            chunks.extend(self.pp(depth))
        if self.p(0.12):
            chunks.append(("ADVP", [(self.choice(VERB_ADVERBS + CLAUSE_ADVERBS), "RB")]))
        if depth < MAX_DEPTH and self.p(0.07):
            sub = self.choice(SUBORDINATORS[1:])
            chunks.append(("SBAR", [sub]))
            chunks.extend(self.clause(depth + 1))
        return chunks

    def verb_phrasal(self):
        cands = [v for v in self.lex.verbs if any(f.startswith("phr:") for f in v[5].split())]
        v = self.choice(cands)
        particle = self.choice([f[4:] for f in v[5].split() if f.startswith("phr:")])
        return v + (particle,)

    def sentence(self):
        chunks = []
        r = self.rng.random()
        if r < 0.1:
            chunks.append(("ADVP", [(self.choice(CLAUSE_ADVERBS), "RB")]))
            chunks.append((None, [(",", ",")]))
        elif r < 0.18:
            chunks.extend(self.pp(1))
            chunks.append((None, [(",", ",")]))
        elif r < 0.21:
            sub = self.choice(SUBORDINATORS[1:])
            chunks.append(("SBAR", [sub]))
            chunks.extend(self.clause(MAX_DEPTH))
            chunks.append((None, [(",", ",")]))
        chunks.extend(self.clause())
        if self.p(0.07):
            if self.p(0.5):
                chunks.append((None, [(",", ",")]))
            chunks.append((None, [(self.choice(COORDINATORS), "CC")]))
            chunks.extend(self.clause(1))
        chunks.append((None, [(self.choice([".", ".", ".", ".", "!", "?"]), ".")]))
        return chunks

    # --- output -----------------------------------------------------------
    def noisy_tag(self, word, tag):
        """The tag an imperfect tagger might give: worse on ambiguous and unknown words."""
        if word in self.lex.noun_verb_words and self.p(AMBIGUOUS_NOISE):
            if tag in ("NN", "NNS"):
                return {"NN": "VB", "NNS": "VBZ"}[tag] if self.p(0.7) else "VBP"
            if tag.startswith("VB"):
                return "NNS" if tag == "VBZ" else "NN"
        rate = RARE_NOISE if word in self.lex.rare_words else POS_NOISE
        if tag in CONFUSIONS and self.p(rate):
            return self.choice(CONFUSIONS[tag])
        return tag

    def tokens(self, chunks):
        """(word, tag, chunk label) triples in IOB2, with noisy tags."""
        out = []
        for i, (kind, toks) in enumerate(chunks):
            for j, (w, tag) in enumerate(toks):
                if kind is None:
                    label = "O"
                else:
                    label = ("B-" if j == 0 else "I-") + kind
                if i == 0 and j == 0 and w[0].islower():
                    w = w[0].upper() + w[1:]
                tag = self.noisy_tag(w.lower(), tag)
                out.append((w, tag, label))
        return out


def generate(n, rng, lex):
    g = Grammar(rng, lex)
    lines = []
    for _ in range(n):
        for w, tag, label in g.tokens(g.sentence()):
            lines.append(f"{w}\t{tag}\t{label}\n")
        lines.append("\n")
    return "".join(lines)


def main(argv):
    out_dir = argv[1] if len(argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(SEED)
    lex = Lexicon(rng)
    train = generate(N_TRAIN, random.Random(SEED + 1), lex)
    test = generate(N_TEST, random.Random(SEED + 2), lex)
    for name, text in (("demo.train", train), ("demo.test", test)):
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        n_sent = text.count("\n\n")
        print(f"wrote {path}: {n_sent} sentences, {len(text.encode('utf-8'))} bytes")


if __name__ == "__main__":
    main(sys.argv)
