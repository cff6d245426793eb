"""The built-in task: a synthetic English -> German-like language pair, generated in code.

A deterministic grammar whose translation needs more than word-by-word copying, so that attention and
positions genuinely matter (Bahdanau et al. 2015), and which a small model does not learn perfectly within
a CPU budget. docs/getting-started.md ("The built-in task") tells what it holds; the tables and rules below
are that grammar, beyond the page: the perfect picks ``haben`` or ``sein``, dative plurals add ``-n``, the
object of a relative clause moves to its front, and English sentence-final adverbs move into the German
middle field.

Both directions are functions (verb agreement disambiguates ``sie``). The data never depends on a run's seed:
the generator has its own fixed seeds and a hash of a sentence's English text decides its split, so ``train``
(the first ``n_train`` pairs of one stream), ``val`` and ``test`` are disjoint and ``val``/``test`` do not
change with ``n_train``."""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
from dataclasses import dataclass
from typing import Iterator, Optional, Union


def _table(text: str) -> list[tuple]:
    """A word table: entries separated by ``;``, the fields of an entry by ``,``."""
    return [tuple(entry.strip().split(",")) for entry in text.split(";")]


def _verbs(text: str) -> list[tuple]:
    """A verb table (:func:`_table`) whose optional seventh field holds the irregular (du, er) present forms."""
    return [(*row[:6], tuple(row[6].split()) if len(row) > 6 else None) for row in _table(text)]


# noun: English singular, plural; German singular, plural, gender. No weak masculine nouns
# (der Junge / den Jungen): their extra -n would be the only case marking on a noun.
ANIMATE = _table(
    """
    man,men,Mann,Männer,m; woman,women,Frau,Frauen,f; child,children,Kind,Kinder,n; dog,dogs,Hund,Hunde,m;
    girl,girls,Mädchen,Mädchen,n; cat,cats,Katze,Katzen,f; teacher,teachers,Lehrer,Lehrer,m;
    horse,horses,Pferd,Pferde,n; friend,friends,Freund,Freunde,m; bird,birds,Vogel,Vögel,m;
    mother,mothers,Mutter,Mütter,f; father,fathers,Vater,Väter,m; cook,cooks,Koch,Köche,m;
    student,students,Studentin,Studentinnen,f; doctor,doctors,Ärztin,Ärztinnen,f;
    sister,sisters,Schwester,Schwestern,f; brother,brothers,Bruder,Brüder,m; king,kings,König,Könige,m;
    queen,queens,Königin,Königinnen,f; baby,babies,Baby,Babys,n; cow,cows,Kuh,Kühe,f; singer,singers,Sänger,Sänger,m;
    daughter,daughters,Tochter,Töchter,f; son,sons,Sohn,Söhne,m; baker,bakers,Bäcker,Bäcker,m;
    mouse,mice,Maus,Mäuse,f; pig,pigs,Schwein,Schweine,n; uncle,uncles,Onkel,Onkel,m; aunt,aunts,Tante,Tanten,f;
    duck,ducks,Ente,Enten,f; wolf,wolves,Wolf,Wölfe,m; fox,foxes,Fuchs,Füchse,m; guest,guests,Gast,Gäste,m;
    painter,painters,Maler,Maler,m; dancer,dancers,Tänzerin,Tänzerinnen,f; driver,drivers,Fahrer,Fahrer,m;
    waiter,waiters,Kellner,Kellner,m; thief,thieves,Dieb,Diebe,m; owl,owls,Eule,Eulen,f;
    chicken,chickens,Huhn,Hühner,n; lamb,lambs,Lamm,Lämmer,n; frog,frogs,Frosch,Frösche,m;
    nurse,nurses,Pflegerin,Pflegerinnen,f; farmer,farmers,Landwirt,Landwirte,m; camel,camels,Kamel,Kamele,n;
    spider,spiders,Spinne,Spinnen,f; grandmother,grandmothers,Großmutter,Großmütter,f;
    grandfather,grandfathers,Großvater,Großväter,m; neighbour,neighbours,Nachbarin,Nachbarinnen,f;
    goat,goats,Ziege,Ziegen,f
    """
)
THINGS = _table(
    """
    book,books,Buch,Bücher,n; ball,balls,Ball,Bälle,m; car,cars,Auto,Autos,n; apple,apples,Apfel,Äpfel,m;
    table,tables,Tisch,Tische,m; door,doors,Tür,Türen,f; house,houses,Haus,Häuser,n; letter,letters,Brief,Briefe,m;
    flower,flowers,Blume,Blumen,f; chair,chairs,Stuhl,Stühle,m; bag,bags,Tasche,Taschen,f;
    window,windows,Fenster,Fenster,n; picture,pictures,Bild,Bilder,n; cup,cups,Tasse,Tassen,f; hat,hats,Hut,Hüte,m;
    bicycle,bicycles,Fahrrad,Fahrräder,n; key,keys,Schlüssel,Schlüssel,m; bottle,bottles,Flasche,Flaschen,f;
    box,boxes,Kiste,Kisten,f; clock,clocks,Uhr,Uhren,f; lamp,lamps,Lampe,Lampen,f; plate,plates,Teller,Teller,m;
    knife,knives,Messer,Messer,n; shoe,shoes,Schuh,Schuhe,m; shirt,shirts,Hemd,Hemden,n; coat,coats,Mantel,Mäntel,m;
    bed,beds,Bett,Betten,n; boat,boats,Boot,Boote,n; train,trains,Zug,Züge,m; ring,rings,Ring,Ringe,m;
    stone,stones,Stein,Steine,m; egg,eggs,Ei,Eier,n; cake,cakes,Kuchen,Kuchen,m; glass,glasses,Glas,Gläser,n;
    newspaper,newspapers,Zeitung,Zeitungen,f; map,maps,Karte,Karten,f; pen,pens,Stift,Stifte,m;
    phone,phones,Telefon,Telefone,n; basket,baskets,Korb,Körbe,m; blanket,blankets,Decke,Decken,f;
    mirror,mirrors,Spiegel,Spiegel,m; candle,candles,Kerze,Kerzen,f; gift,gifts,Geschenk,Geschenke,n;
    umbrella,umbrellas,Schirm,Schirme,m; bucket,buckets,Eimer,Eimer,m; pillow,pillows,Kissen,Kissen,n;
    photo,photos,Foto,Fotos,n; spoon,spoons,Löffel,Löffel,m; song,songs,Lied,Lieder,n;
    toy,toys,Spielzeug,Spielzeuge,n
    """
)
PLACES = _table(
    """
    garden,gardens,Garten,Gärten,m; park,parks,Park,Parks,m; kitchen,kitchens,Küche,Küchen,f;
    street,streets,Straße,Straßen,f; school,schools,Schule,Schulen,f; forest,forests,Wald,Wälder,m;
    city,cities,Stadt,Städte,f; river,rivers,Fluss,Flüsse,m; tree,trees,Baum,Bäume,m;
    bridge,bridges,Brücke,Brücken,f; lake,lakes,See,Seen,m; village,villages,Dorf,Dörfer,n;
    room,rooms,Zimmer,Zimmer,n; church,churches,Kirche,Kirchen,f; market,markets,Markt,Märkte,m;
    station,stations,Bahnhof,Bahnhöfe,m; field,fields,Feld,Felder,n; hill,hills,Hügel,Hügel,m;
    shop,shops,Laden,Läden,m; library,libraries,Bibliothek,Bibliotheken,f; tower,towers,Turm,Türme,m;
    castle,castles,Schloss,Schlösser,n; wall,walls,Mauer,Mauern,f; beach,beaches,Strand,Strände,m;
    office,offices,Büro,Büros,n; hospital,hospitals,Krankenhaus,Krankenhäuser,n; tent,tents,Zelt,Zelte,n;
    barn,barns,Scheune,Scheunen,f
    """
)
ADJECTIVES = _table(
    """
    big,groß; small,klein; old,alt; young,jung; red,rot; green,grün; blue,blau; black,schwarz; white,weiß;
    tired,müde; new,neu; beautiful,schön; happy,froh; strange,seltsam; dark,dunkel; warm,warm; long,lang; short,kurz;
    heavy,schwer; cold,kalt; hot,heiß; clean,sauber; dirty,schmutzig; rich,reich; poor,arm; yellow,gelb; brown,braun;
    sad,traurig; clever,klug; brave,mutig; friendly,freundlich; famous,berühmt; empty,leer; full,voll; soft,weich;
    wild,wild; round,rund; cheap,billig; wet,nass; sick,krank; strong,stark; proud,stolz; hungry,hungrig; lazy,faul;
    gray,grau
    """
)
# verb: English base, 3sg, participle; German infinitive ("an|rufen" marks a separable prefix:
# "ruft ... an" in a main clause, "anruft" at the end of a subordinate one), participle,
# auxiliary of the perfect, irregular (du, er) present forms or None.
TRANSITIVE = _verbs(
    """
    see,sees,seen,sehen,gesehen,haben,siehst sieht; buy,buys,bought,kaufen,gekauft,haben;
    find,finds,found,finden,gefunden,haben; carry,carries,carried,tragen,getragen,haben,trägst trägt;
    call,calls,called,an|rufen,angerufen,haben; paint,paints,painted,malen,gemalt,haben;
    read,reads,read,lesen,gelesen,haben,liest liest; pick up,picks up,picked up,ab|holen,abgeholt,haben;
    hold,holds,held,halten,gehalten,haben,hältst hält; wash,washes,washed,waschen,gewaschen,haben,wäschst wäscht;
    invite,invites,invited,ein|laden,eingeladen,haben,lädst lädt; build,builds,built,bauen,gebaut,haben;
    open,opens,opened,öffnen,geöffnet,haben,öffnest öffnet; look for,looks for,looked for,suchen,gesucht,haben;
    close,closes,closed,zu|machen,zugemacht,haben; write,writes,written,schreiben,geschrieben,haben;
    bring,brings,brought,bringen,gebracht,haben; eat,eats,eaten,essen,gegessen,haben,isst isst;
    clean,cleans,cleaned,putzen,geputzt,haben;
    take along,takes along,taken along,mit|nehmen,mitgenommen,haben,nimmst nimmt;
    love,loves,loved,lieben,geliebt,haben; need,needs,needed,brauchen,gebraucht,haben;
    visit,visits,visited,besuchen,besucht,haben; switch on,switches on,switched on,ein|schalten,eingeschaltet,haben;
    forget,forgets,forgotten,vergessen,vergessen,haben,vergisst vergisst; sell,sells,sold,verkaufen,verkauft,haben;
    draw,draws,drawn,zeichnen,gezeichnet,haben,zeichnest zeichnet;
    catch,catches,caught,fangen,gefangen,haben,fängst fängt; hear,hears,heard,hören,gehört,haben;
    tidy up,tidies up,tidied up,auf|räumen,aufgeräumt,haben; lose,loses,lost,verlieren,verloren,haben;
    repair,repairs,repaired,reparieren,repariert,haben; hide,hides,hidden,verstecken,versteckt,haben;
    throw,throws,thrown,werfen,geworfen,haben,wirfst wirft; pull,pulls,pulled,ziehen,gezogen,haben;
    cut,cuts,cut,schneiden,geschnitten,haben
    """
)
INTRANSITIVE = _verbs(
    """
    sleep,sleeps,slept,schlafen,geschlafen,haben,schläfst schläft; run,runs,run,laufen,gelaufen,sein,läufst läuft;
    sing,sings,sung,singen,gesungen,haben; laugh,laughs,laughed,lachen,gelacht,haben;
    stand up,stands up,stood up,auf|stehen,aufgestanden,sein; wait,waits,waited,warten,gewartet,haben;
    swim,swims,swum,schwimmen,geschwommen,sein; come back,comes back,come back,zurück|kommen,zurückgekommen,sein;
    dance,dances,danced,tanzen,getanzt,haben; work,works,worked,arbeiten,gearbeitet,haben;
    fall asleep,falls asleep,fallen asleep,ein|schlafen,eingeschlafen,sein,schläfst schläft;
    come,comes,come,kommen,gekommen,sein; play,plays,played,spielen,gespielt,haben;
    cry,cries,cried,weinen,geweint,haben; go out,goes out,gone out,aus|gehen,ausgegangen,sein;
    jump,jumps,jumped,springen,gesprungen,sein; listen,listens,listened,zu|hören,zugehört,haben;
    travel,travels,travelled,reisen,gereist,sein; fly,flies,flown,fliegen,geflogen,sein;
    rest,rests,rested,ruhen,geruht,haben
    """
)
REPORTING = _table(
    "say,says,sagen; think,thinks,denken; know,knows,wissen; believe,believes,glauben; hope,hopes,hoffen"
)
IRREGULAR_PRESENT = {  # ich, du, er, wir, sie(pl)
    "haben": ("habe", "hast", "hat", "haben", "haben"),
    "sein": ("bin", "bist", "ist", "sind", "sind"),
    "können": ("kann", "kannst", "kann", "können", "können"),
    "müssen": ("muss", "musst", "muss", "müssen", "müssen"),
    "wollen": ("will", "willst", "will", "wollen", "wollen"),
    "dürfen": ("darf", "darfst", "darf", "dürfen", "dürfen"),
    "wissen": ("weiß", "weißt", "weiß", "wissen", "wissen"),
}
MODALS = _table("can,can,können; must,must,müssen; want to,wants to,wollen; may,may,dürfen")
# pronoun: English, German, person index into the (ich, du, er, wir, sie) forms, English 3sg?
PRONOUNS = [
    ("I", "ich", 0, False),
    ("you", "du", 1, False),
    ("he", "er", 2, True),
    ("she", "sie", 2, True),
    ("we", "wir", 3, False),
    ("they", "sie", 4, False),
]
PREPOSITIONS = _table(
    "in,in; with,mit; behind,hinter; under,unter; next to,neben; near,bei; in front of,vor; above,über"
)
CONTRACTIONS = {("in", "dem"): "im", ("bei", "dem"): "beim"}
MANNER = _table(
    "quickly,schnell; slowly,langsam; quietly,leise; carefully,vorsichtig; loudly,laut; gladly,gern; alone,allein"
)
TIME = _table("today,heute; now,jetzt; often,oft; sometimes,manchmal; later,später; tomorrow,morgen; yesterday,gestern")
SUBORDINATORS = _table("because,weil; although,obwohl; while,während; when,wenn; before,bevor; if,falls")


DEFINITE = {
    "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
INDEFINITE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}


def present(infinitive: str, person: int, irregular: Optional[tuple[str, str]] = None) -> str:
    """German present tense of ``infinitive`` for person index 0..4 (ich, du, er, wir, sie)."""
    if infinitive in IRREGULAR_PRESENT:
        return IRREGULAR_PRESENT[infinitive][person]
    if person in (3, 4):
        return infinitive
    if person in (1, 2) and irregular:
        return irregular[person - 1]
    stem = infinitive[:-2]
    if person == 0:
        return stem + "e"
    linking = "e" if stem.endswith(("t", "d")) else ""
    if person == 1:
        return stem + linking + ("t" if stem.endswith(("s", "ß", "z", "x")) else "st")
    return stem + linking + "t"


def adjective_ending(case: str, key: str, article: str) -> str:
    """Weak (after der), mixed (after ein) or strong (no article, plural) adjective ending."""
    if article == "def":
        return "e" if key != "pl" and (case == "nom" or (case == "acc" and key != "m")) else "en"
    if article == "indef" and key != "pl":
        if case == "dat" or (case == "acc" and key == "m"):
            return "en"
        return {"m": "er", "f": "e", "n": "es"}[key]
    return "en" if case == "dat" else "e"


def adjective_stem(adjective: str) -> str:
    """``dunkel`` -> ``dunkl``, ``müde`` -> ``müd``: the form endings attach to."""
    if adjective.endswith("el"):
        return adjective[:-2] + "l"
    return adjective[:-1] if adjective.endswith("e") else adjective


def dative_plural(noun: str) -> str:
    """``Kinder`` -> ``Kindern``: the dative plural adds -n unless the plural ends in -n or -s."""
    return noun if noun.endswith(("n", "s")) else noun + "n"


VERSION = 2
"""Bump when the grammar changes: it is part of the cache key."""
SEED = 20240601
LANGS = ("en", "de")
N_EVAL = 500
"""Validation and test pairs of each split by default (`data.builtin_eval_pairs`)."""
MIN_WORDS, MAX_WORDS = 5, 40
"""English sentence lengths kept (words, punctuation excluded)."""
RELATIVE_P = 0.3
"""Chance that a subject or object noun phrase carries a relative clause (halved per level)."""
MAX_DEPTH = 2
"""Relative clauses nest at most this deep."""
COMPOUND_P = 0.15
"""Chance that an inanimate noun is a compound (``garden door`` -> ``Gartentür``)."""
ANIMATE_EN = {noun[0] for noun in ANIMATE}


@dataclass(frozen=True)
class Gap:
    """The antecedent's place inside its relative clause: ``who``/``that``, ``der``/``den``/..."""

    plural: bool
    key: str  # German gender or "pl"
    animate: bool


@dataclass(frozen=True)
class NounPhrase:
    noun: tuple
    plural: bool
    article: str  # "def" or "indef" (plural indefinite has no article)
    adjective: Optional[tuple]
    relative: Optional[Clause] = None
    """A restrictive relative clause whose subject or object is a :class:`Gap` for this noun."""

    @property
    def key(self) -> str:
        return "pl" if self.plural else self.noun[4]

    def en(self) -> list[str]:
        words = ([self.adjective[0]] if self.adjective else []) + [self.noun[1 if self.plural else 0]]
        if self.article == "def":
            words = ["the"] + words
        elif not self.plural:
            words = ["an" if words[0][0] in "aeiou" else "a"] + words
        return words + (self.relative.en() if self.relative else [])

    def de(self, case: str) -> list[str]:
        key = self.key
        noun = self.noun[3] if self.plural else self.noun[2]
        if self.plural and case == "dat":
            noun = dative_plural(noun)
        words = []
        if self.article == "def":
            words.append(DEFINITE[case][key])
        elif not self.plural:
            words.append(INDEFINITE[case][key])
        if self.adjective:
            words.append(adjective_stem(self.adjective[1]) + adjective_ending(case, key, self.article))
        words.append(noun)
        if self.relative:  # commas on both sides; _surface drops one before another or the full stop
            words += [","] + self.relative.de_subordinate() + [","]
        return words


Subject = Union[NounPhrase, Gap, tuple]  # tuple: a pronoun of PRONOUNS
Object = Optional[Union[NounPhrase, Gap]]


def _person(subject: Subject) -> tuple[int, bool]:
    """The person index into the (ich, du, er, wir, sie) forms, and whether English takes its 3rd singular."""
    if isinstance(subject, (NounPhrase, Gap)):
        return (4, False) if subject.plural else (2, True)
    return subject[2], subject[3]


@dataclass(frozen=True)
class Clause:
    subject: Subject
    verb: tuple
    tense: str  # "present", "perfect" or "modal"
    modal: Optional[tuple]  # set exactly when tense == "modal"
    negated: bool
    obj: Object
    pp: Optional[tuple]  # (preposition, NounPhrase)
    manner: Optional[tuple]
    time: Optional[tuple]

    def en(self) -> list[str]:
        person, third = _person(self.subject)
        if isinstance(self.subject, Gap):
            subject = ["who" if self.subject.animate else "that"]
        else:
            subject = self.subject.en() if isinstance(self.subject, NounPhrase) else [self.subject[0]]
        base, s3, participle = self.verb[:3]
        if self.tense == "perfect":
            verbs = ["has" if third else "have"] + (["not"] if self.negated else []) + [participle]
        elif self.modal:
            modal = self.modal[1] if third else self.modal[0]
            if self.negated and modal.endswith("to"):
                verbs = ["does" if third else "do", "not", self.modal[0], base]
            else:
                verbs = [modal] + (["not"] if self.negated else []) + [base]
        elif self.negated:
            verbs = ["does" if third else "do", "not", base]
        else:
            verbs = [s3 if third else base]
        if isinstance(self.obj, Gap):  # object relative: "that the man reads"
            words = ["that"] + subject + verbs
        else:
            words = subject + verbs + (self.obj.en() if self.obj else [])
        if self.pp:
            words += [self.pp[0][0]] + self.pp[1].en()
        words += [self.manner[0]] if self.manner else []
        return words + ([self.time[0]] if self.time else [])

    def de_parts(self, subordinate: bool = False) -> tuple[list[str], str, list[str], list[str]]:
        """(subject, finite verb, middle field, clause-final verb cluster).

        A separable prefix (``an|rufen``) ends a main clause (``ruft ... an``) and joins the
        finite verb at the end of a subordinate one (``anruft``).
        """
        person, _ = _person(self.subject)
        if isinstance(self.subject, Gap):
            subject = [DEFINITE["nom"][self.subject.key]]
        elif isinstance(self.subject, NounPhrase):
            subject = self.subject.de("nom")
        else:
            subject = [self.subject[1]]
        infinitive, participle, auxiliary, irregular = self.verb[3:7]
        prefix, _, stem = infinitive.rpartition("|")
        if self.tense == "perfect":
            finite, final = present(auxiliary, person), [participle]
        elif self.modal:
            finite, final = present(self.modal[2], person), [prefix + stem]
        else:
            finite = present(stem, person, irregular)
            finite, final = (prefix + finite, []) if subordinate else (finite, [prefix] if prefix else [])
        middle = [self.time[1]] if self.time else []
        middle += self.obj.de("acc") if isinstance(self.obj, NounPhrase) else []
        middle += ["nicht"] if self.negated else []
        middle += [self.manner[1]] if self.manner else []
        if self.pp:
            prep, *noun_phrase = [self.pp[0][1]] + self.pp[1].de("dat")
            contracted = CONTRACTIONS.get((prep, noun_phrase[0]))
            middle += [contracted] + noun_phrase[1:] if contracted else [prep] + noun_phrase
        return subject, finite, middle, final

    def de_main(self, front_time: bool = False) -> list[str]:
        subject, finite, middle, final = self.de_parts()
        if front_time and self.time:
            return [self.time[1], finite] + subject + middle[1:] + final
        return subject + [finite] + middle + final

    def de_inverted(self) -> list[str]:
        """Verb-first order, used after a fronted subordinate clause."""
        subject, finite, middle, final = self.de_parts()
        return [finite] + subject + middle + final

    def de_subordinate(self) -> list[str]:
        """Verb-final order; a relative clause's object pronoun comes first (``das der Mann liest``)."""
        subject, finite, middle, final = self.de_parts(subordinate=True)
        front = [DEFINITE["acc"][self.obj.key]] if isinstance(self.obj, Gap) else []
        return front + subject + middle + final + [finite]


@functools.cache
def _zipf_cumulative(n: int) -> list[float]:
    return list(itertools.accumulate(1 / (i + 1) for i in range(n)))


def _pick(rng: random.Random, items: list):
    """One of ``items`` with Zipfian weight 1 / (rank + 1): the list's head is common, its tail rare."""
    return rng.choices(items, cum_weights=_zipf_cumulative(len(items)))[0]


def compound(modifier: tuple, head: tuple) -> tuple:
    """``kitchen`` + ``table`` -> ``kitchen table`` / ``Küchentisch``: German writes compounds as one
    word, gender and plural from the head, ``-n-`` after a modifier ending in ``-e`` (a simplified
    linking rule). Thousands of rare words, each to be translated from its parts."""
    linked = modifier[2] + ("n" if modifier[2].endswith("e") else "")
    return (
        f"{modifier[0]} {head[0]}",
        f"{modifier[0]} {head[1]}",
        linked + head[2].lower(),
        linked + head[3].lower(),
        head[4],
    )


def _noun_phrase(
    rng: random.Random, nouns: list, adjective_p: float = 0.35, depth: int = 0, relative_p: float = 0.0
) -> NounPhrase:
    plural = rng.random() < 0.3
    article = "def" if rng.random() < 0.6 else "indef"
    adjective = _pick(rng, ADJECTIVES) if rng.random() < adjective_p else None
    noun = _pick(rng, nouns)
    if noun[0] not in ANIMATE_EN and rng.random() < COMPOUND_P:
        modifier = rng.choice(THINGS + PLACES)  # uniform: most compounds are rare
        if modifier[0] != noun[0]:
            noun = compound(modifier, noun)
    relative = None
    if depth < MAX_DEPTH and rng.random() < relative_p:
        relative = _relative(rng, Gap(plural, "pl" if plural else noun[4], nouns is ANIMATE), depth + 1)
    return NounPhrase(noun, plural, article, adjective, relative)


def _tense(rng: random.Random) -> tuple[str, Optional[tuple]]:
    tense = rng.choices(["present", "perfect", "modal"], weights=[2, 1, 1])[0]
    return tense, (_pick(rng, MODALS) if tense == "modal" else None)


def _relative(rng: random.Random, gap: Gap, depth: int) -> Clause:
    """A relative clause about ``gap``'s noun, as its subject or (transitive verbs) its object."""
    nested = RELATIVE_P / 2**depth
    tense, modal = _tense(rng)
    if rng.random() < 0.5:  # "the man who sees the dog"
        transitive = rng.random() < 0.65
        verb = _pick(rng, TRANSITIVE if transitive else INTRANSITIVE)
        obj: Object = _noun_phrase(rng, THINGS + ANIMATE, depth=depth, relative_p=nested) if transitive else None
        subject: Subject = gap
    else:  # "the book that the man reads"
        verb, obj = _pick(rng, TRANSITIVE), gap
        subject = _subject(rng, depth, nested)
    negated = rng.random() < 0.1 and (not isinstance(obj, NounPhrase) or obj.article == "def")
    return Clause(subject, verb, tense, modal, negated, obj, None, None, None)


def _subject(rng: random.Random, depth: int = 0, relative_p: float = RELATIVE_P) -> Union[NounPhrase, tuple]:
    if rng.random() < 0.2:
        return _pick(rng, PRONOUNS)
    return _noun_phrase(rng, ANIMATE, depth=depth, relative_p=relative_p)


def _clause(rng: random.Random, adverbs: bool = True) -> Clause:
    subject = _subject(rng)
    transitive = rng.random() < 0.65
    verb = _pick(rng, TRANSITIVE if transitive else INTRANSITIVE)
    obj = _noun_phrase(rng, THINGS + ANIMATE, relative_p=RELATIVE_P) if transitive else None
    tense, modal = _tense(rng)
    negated = rng.random() < 0.15 and (obj is None or obj.article == "def")
    pp = None
    if rng.random() < 0.4:
        pp = (_pick(rng, PREPOSITIONS), _noun_phrase(rng, PLACES + THINGS, adjective_p=0.2))
    manner = _pick(rng, MANNER) if adverbs and rng.random() < 0.15 else None
    time = _pick(rng, TIME) if adverbs and rng.random() < 0.2 else None
    return Clause(subject, verb, tense, modal, negated, obj, pp, manner, time)


def _sentence(rng: random.Random) -> tuple[list[str], list[str]]:
    """One pair as word lists (punctuation as separate items)."""
    kind = rng.choices(["simple", "subordinate", "fronted", "reported"], weights=[4, 3, 2, 1])[0]
    if kind == "reported":
        subject = _subject(rng, relative_p=0.0)
        person, third = _person(subject)
        verb = _pick(rng, REPORTING)
        inner = _clause(rng, adverbs=False)
        en_subject = subject.en() if isinstance(subject, NounPhrase) else [subject[0]]
        de_subject = subject.de("nom") if isinstance(subject, NounPhrase) else [subject[1]]
        en = en_subject + [verb[1] if third else verb[0], "that"] + inner.en()
        de = de_subject + [present(verb[2], person), ",", "dass"] + inner.de_subordinate()
        return en, de
    main = _clause(rng)
    if kind == "simple":
        if main.time is not None and rng.random() < 0.4:  # the time adverb first
            return [main.time[0]] + main.en()[:-1], main.de_main(front_time=True)
        return main.en(), main.de_main()
    conj = _pick(rng, SUBORDINATORS)
    sub = _clause(rng, adverbs=False)
    if kind == "subordinate":
        return main.en() + [conj[0]] + sub.en(), main.de_main() + [",", conj[1]] + sub.de_subordinate()
    return ([conj[0]] + sub.en() + [","] + main.en(), [conj[1]] + sub.de_subordinate() + [","] + main.de_inverted())


def _surface(words: list[str]) -> str:
    """Join words, attach punctuation, capitalise the first letter, end with a full stop.

    A relative clause brings a comma on each side; one before another comma or the full stop
    is dropped (``..., der schläft, weil ...``, ``... den Hund, der schläft.``).
    """
    kept = [w for i, w in enumerate(words) if not (w == "," and (i + 1 == len(words) or words[i + 1] == ","))]
    text = " ".join(kept).replace(" ,", ",") + "."
    return text[0].upper() + text[1:]


def _stream(split: str) -> Iterator[tuple[str, str]]:
    """Endless pairs of ``split`` by the English text's bucket (MD5's first byte mod 10; ``train``: >= 2, ``val``: 0,
    ``test``: 1), 5-40 words; ``val`` and ``test`` never repeat a sentence."""
    rng = random.Random(f"{SEED}-{split}")
    wanted = {"val": {0}, "test": {1}}.get(split, set(range(2, 10)))
    seen: set[str] = set()
    while True:
        en_words, de_words = _sentence(rng)
        if not MIN_WORDS <= sum(w != "," for w in en_words) <= MAX_WORDS:
            continue
        en_text = _surface(en_words)
        if hashlib.md5(en_text.encode()).digest()[0] % 10 in wanted and en_text not in seen:
            if split != "train":
                seen.add(en_text)
            yield en_text, _surface(de_words)


def generate(split: str, n: int) -> list[tuple[str, str]]:
    """The first ``n`` (English, German) pairs of ``split``."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"builtin split must be train, val or test, not {split!r}")
    return list(itertools.islice(_stream(split), n))
