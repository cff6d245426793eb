"""The word lists of the built-in task (:mod:`ablate.data.builtin`): English and German forms.

Each list is ordered from common to rare: the generator draws from it with Zipfian weights
(the i-th entry with weight 1 / (i + 1)), so a few words are everywhere and the tail is seen
only a handful of times in a few thousand training pairs, as in real text. English singular and
plural always differ, and no two entries share a German or an English form, so translation is
a function in both directions.
"""

from __future__ import annotations

# noun: English singular, plural; German singular, plural, gender. No weak masculine nouns
# (der Junge / den Jungen): their extra -n would be the only case marking on a noun.
ANIMATE = [
    ("man", "men", "Mann", "Männer", "m"), ("woman", "women", "Frau", "Frauen", "f"),
    ("child", "children", "Kind", "Kinder", "n"), ("dog", "dogs", "Hund", "Hunde", "m"),
    ("girl", "girls", "Mädchen", "Mädchen", "n"), ("cat", "cats", "Katze", "Katzen", "f"),
    ("teacher", "teachers", "Lehrer", "Lehrer", "m"), ("horse", "horses", "Pferd", "Pferde", "n"),
    ("friend", "friends", "Freund", "Freunde", "m"), ("bird", "birds", "Vogel", "Vögel", "m"),
    ("mother", "mothers", "Mutter", "Mütter", "f"), ("father", "fathers", "Vater", "Väter", "m"),
    ("cook", "cooks", "Koch", "Köche", "m"), ("student", "students", "Studentin", "Studentinnen", "f"),
    ("doctor", "doctors", "Ärztin", "Ärztinnen", "f"), ("sister", "sisters", "Schwester", "Schwestern", "f"),
    ("brother", "brothers", "Bruder", "Brüder", "m"), ("king", "kings", "König", "Könige", "m"),
    ("queen", "queens", "Königin", "Königinnen", "f"), ("baby", "babies", "Baby", "Babys", "n"),
    ("cow", "cows", "Kuh", "Kühe", "f"), ("singer", "singers", "Sänger", "Sänger", "m"),
    ("daughter", "daughters", "Tochter", "Töchter", "f"), ("son", "sons", "Sohn", "Söhne", "m"),
    ("baker", "bakers", "Bäcker", "Bäcker", "m"), ("mouse", "mice", "Maus", "Mäuse", "f"),
    ("pig", "pigs", "Schwein", "Schweine", "n"), ("uncle", "uncles", "Onkel", "Onkel", "m"),
    ("aunt", "aunts", "Tante", "Tanten", "f"), ("duck", "ducks", "Ente", "Enten", "f"),
    ("wolf", "wolves", "Wolf", "Wölfe", "m"), ("fox", "foxes", "Fuchs", "Füchse", "m"),
    ("guest", "guests", "Gast", "Gäste", "m"), ("painter", "painters", "Maler", "Maler", "m"),
    ("dancer", "dancers", "Tänzerin", "Tänzerinnen", "f"), ("driver", "drivers", "Fahrer", "Fahrer", "m"),
    ("waiter", "waiters", "Kellner", "Kellner", "m"), ("thief", "thieves", "Dieb", "Diebe", "m"),
    ("owl", "owls", "Eule", "Eulen", "f"), ("chicken", "chickens", "Huhn", "Hühner", "n"),
    ("lamb", "lambs", "Lamm", "Lämmer", "n"), ("frog", "frogs", "Frosch", "Frösche", "m"),
    ("nurse", "nurses", "Pflegerin", "Pflegerinnen", "f"), ("farmer", "farmers", "Landwirt", "Landwirte", "m"),
    ("camel", "camels", "Kamel", "Kamele", "n"), ("spider", "spiders", "Spinne", "Spinnen", "f"),
    ("grandmother", "grandmothers", "Großmutter", "Großmütter", "f"),
    ("grandfather", "grandfathers", "Großvater", "Großväter", "m"),
    ("neighbour", "neighbours", "Nachbarin", "Nachbarinnen", "f"), ("goat", "goats", "Ziege", "Ziegen", "f"),
]
THINGS = [
    ("book", "books", "Buch", "Bücher", "n"), ("ball", "balls", "Ball", "Bälle", "m"),
    ("car", "cars", "Auto", "Autos", "n"), ("apple", "apples", "Apfel", "Äpfel", "m"),
    ("table", "tables", "Tisch", "Tische", "m"), ("door", "doors", "Tür", "Türen", "f"),
    ("house", "houses", "Haus", "Häuser", "n"), ("letter", "letters", "Brief", "Briefe", "m"),
    ("flower", "flowers", "Blume", "Blumen", "f"), ("chair", "chairs", "Stuhl", "Stühle", "m"),
    ("bag", "bags", "Tasche", "Taschen", "f"), ("window", "windows", "Fenster", "Fenster", "n"),
    ("picture", "pictures", "Bild", "Bilder", "n"), ("cup", "cups", "Tasse", "Tassen", "f"),
    ("hat", "hats", "Hut", "Hüte", "m"), ("bicycle", "bicycles", "Fahrrad", "Fahrräder", "n"),
    ("key", "keys", "Schlüssel", "Schlüssel", "m"), ("bottle", "bottles", "Flasche", "Flaschen", "f"),
    ("box", "boxes", "Kiste", "Kisten", "f"), ("clock", "clocks", "Uhr", "Uhren", "f"),
    ("lamp", "lamps", "Lampe", "Lampen", "f"), ("plate", "plates", "Teller", "Teller", "m"),
    ("knife", "knives", "Messer", "Messer", "n"), ("shoe", "shoes", "Schuh", "Schuhe", "m"),
    ("shirt", "shirts", "Hemd", "Hemden", "n"), ("coat", "coats", "Mantel", "Mäntel", "m"),
    ("bed", "beds", "Bett", "Betten", "n"), ("boat", "boats", "Boot", "Boote", "n"),
    ("train", "trains", "Zug", "Züge", "m"), ("ring", "rings", "Ring", "Ringe", "m"),
    ("stone", "stones", "Stein", "Steine", "m"), ("egg", "eggs", "Ei", "Eier", "n"),
    ("cake", "cakes", "Kuchen", "Kuchen", "m"), ("glass", "glasses", "Glas", "Gläser", "n"),
    ("newspaper", "newspapers", "Zeitung", "Zeitungen", "f"), ("map", "maps", "Karte", "Karten", "f"),
    ("pen", "pens", "Stift", "Stifte", "m"), ("phone", "phones", "Telefon", "Telefone", "n"),
    ("basket", "baskets", "Korb", "Körbe", "m"), ("blanket", "blankets", "Decke", "Decken", "f"),
    ("mirror", "mirrors", "Spiegel", "Spiegel", "m"), ("candle", "candles", "Kerze", "Kerzen", "f"),
    ("gift", "gifts", "Geschenk", "Geschenke", "n"), ("umbrella", "umbrellas", "Schirm", "Schirme", "m"),
    ("bucket", "buckets", "Eimer", "Eimer", "m"), ("pillow", "pillows", "Kissen", "Kissen", "n"),
    ("photo", "photos", "Foto", "Fotos", "n"), ("spoon", "spoons", "Löffel", "Löffel", "m"),
    ("song", "songs", "Lied", "Lieder", "n"), ("toy", "toys", "Spielzeug", "Spielzeuge", "n"),
]
PLACES = [
    ("garden", "gardens", "Garten", "Gärten", "m"), ("park", "parks", "Park", "Parks", "m"),
    ("kitchen", "kitchens", "Küche", "Küchen", "f"), ("street", "streets", "Straße", "Straßen", "f"),
    ("school", "schools", "Schule", "Schulen", "f"), ("forest", "forests", "Wald", "Wälder", "m"),
    ("city", "cities", "Stadt", "Städte", "f"), ("river", "rivers", "Fluss", "Flüsse", "m"),
    ("tree", "trees", "Baum", "Bäume", "m"), ("bridge", "bridges", "Brücke", "Brücken", "f"),
    ("lake", "lakes", "See", "Seen", "m"), ("village", "villages", "Dorf", "Dörfer", "n"),
    ("room", "rooms", "Zimmer", "Zimmer", "n"), ("church", "churches", "Kirche", "Kirchen", "f"),
    ("market", "markets", "Markt", "Märkte", "m"), ("station", "stations", "Bahnhof", "Bahnhöfe", "m"),
    ("field", "fields", "Feld", "Felder", "n"), ("hill", "hills", "Hügel", "Hügel", "m"),
    ("shop", "shops", "Laden", "Läden", "m"), ("library", "libraries", "Bibliothek", "Bibliotheken", "f"),
    ("tower", "towers", "Turm", "Türme", "m"), ("castle", "castles", "Schloss", "Schlösser", "n"),
    ("wall", "walls", "Mauer", "Mauern", "f"), ("beach", "beaches", "Strand", "Strände", "m"),
    ("office", "offices", "Büro", "Büros", "n"), ("hospital", "hospitals", "Krankenhaus", "Krankenhäuser", "n"),
    ("tent", "tents", "Zelt", "Zelte", "n"), ("barn", "barns", "Scheune", "Scheunen", "f"),
]
ADJECTIVES = [
    ("big", "groß"), ("small", "klein"), ("old", "alt"), ("young", "jung"), ("red", "rot"),
    ("green", "grün"), ("blue", "blau"), ("black", "schwarz"), ("white", "weiß"), ("tired", "müde"),
    ("new", "neu"), ("beautiful", "schön"), ("happy", "froh"), ("strange", "seltsam"),
    ("dark", "dunkel"), ("warm", "warm"), ("long", "lang"), ("short", "kurz"), ("heavy", "schwer"),
    ("cold", "kalt"), ("hot", "heiß"), ("clean", "sauber"), ("dirty", "schmutzig"), ("rich", "reich"),
    ("poor", "arm"), ("yellow", "gelb"), ("brown", "braun"), ("sad", "traurig"), ("clever", "klug"),
    ("brave", "mutig"), ("friendly", "freundlich"), ("famous", "berühmt"), ("empty", "leer"),
    ("full", "voll"), ("soft", "weich"), ("wild", "wild"), ("round", "rund"), ("cheap", "billig"),
    ("wet", "nass"), ("sick", "krank"), ("strong", "stark"), ("proud", "stolz"), ("hungry", "hungrig"),
    ("lazy", "faul"), ("gray", "grau"),
]
# verb: English base, 3sg, participle; German infinitive ("an|rufen" marks a separable prefix:
# "ruft ... an" in a main clause, "anruft" at the end of a subordinate one), participle,
# auxiliary of the perfect, irregular (du, er) present forms or None.
TRANSITIVE = [
    ("see", "sees", "seen", "sehen", "gesehen", "haben", ("siehst", "sieht")),
    ("buy", "buys", "bought", "kaufen", "gekauft", "haben", None),
    ("find", "finds", "found", "finden", "gefunden", "haben", None),
    ("carry", "carries", "carried", "tragen", "getragen", "haben", ("trägst", "trägt")),
    ("call", "calls", "called", "an|rufen", "angerufen", "haben", None),
    ("paint", "paints", "painted", "malen", "gemalt", "haben", None),
    ("read", "reads", "read", "lesen", "gelesen", "haben", ("liest", "liest")),
    ("pick up", "picks up", "picked up", "ab|holen", "abgeholt", "haben", None),
    ("hold", "holds", "held", "halten", "gehalten", "haben", ("hältst", "hält")),
    ("wash", "washes", "washed", "waschen", "gewaschen", "haben", ("wäschst", "wäscht")),
    ("invite", "invites", "invited", "ein|laden", "eingeladen", "haben", ("lädst", "lädt")),
    ("build", "builds", "built", "bauen", "gebaut", "haben", None),
    ("open", "opens", "opened", "öffnen", "geöffnet", "haben", ("öffnest", "öffnet")),
    ("look for", "looks for", "looked for", "suchen", "gesucht", "haben", None),
    ("close", "closes", "closed", "zu|machen", "zugemacht", "haben", None),
    ("write", "writes", "written", "schreiben", "geschrieben", "haben", None),
    ("bring", "brings", "brought", "bringen", "gebracht", "haben", None),
    ("eat", "eats", "eaten", "essen", "gegessen", "haben", ("isst", "isst")),
    ("clean", "cleans", "cleaned", "putzen", "geputzt", "haben", None),
    ("take along", "takes along", "taken along", "mit|nehmen", "mitgenommen", "haben", ("nimmst", "nimmt")),
    ("love", "loves", "loved", "lieben", "geliebt", "haben", None),
    ("need", "needs", "needed", "brauchen", "gebraucht", "haben", None),
    ("visit", "visits", "visited", "besuchen", "besucht", "haben", None),
    ("switch on", "switches on", "switched on", "ein|schalten", "eingeschaltet", "haben", None),
    ("forget", "forgets", "forgotten", "vergessen", "vergessen", "haben", ("vergisst", "vergisst")),
    ("sell", "sells", "sold", "verkaufen", "verkauft", "haben", None),
    ("draw", "draws", "drawn", "zeichnen", "gezeichnet", "haben", ("zeichnest", "zeichnet")),
    ("catch", "catches", "caught", "fangen", "gefangen", "haben", ("fängst", "fängt")),
    ("hear", "hears", "heard", "hören", "gehört", "haben", None),
    ("tidy up", "tidies up", "tidied up", "auf|räumen", "aufgeräumt", "haben", None),
    ("lose", "loses", "lost", "verlieren", "verloren", "haben", None),
    ("repair", "repairs", "repaired", "reparieren", "repariert", "haben", None),
    ("hide", "hides", "hidden", "verstecken", "versteckt", "haben", None),
    ("throw", "throws", "thrown", "werfen", "geworfen", "haben", ("wirfst", "wirft")),
    ("pull", "pulls", "pulled", "ziehen", "gezogen", "haben", None),
    ("cut", "cuts", "cut", "schneiden", "geschnitten", "haben", None),
]
INTRANSITIVE = [
    ("sleep", "sleeps", "slept", "schlafen", "geschlafen", "haben", ("schläfst", "schläft")),
    ("run", "runs", "run", "laufen", "gelaufen", "sein", ("läufst", "läuft")),
    ("sing", "sings", "sung", "singen", "gesungen", "haben", None),
    ("laugh", "laughs", "laughed", "lachen", "gelacht", "haben", None),
    ("stand up", "stands up", "stood up", "auf|stehen", "aufgestanden", "sein", None),
    ("wait", "waits", "waited", "warten", "gewartet", "haben", None),
    ("swim", "swims", "swum", "schwimmen", "geschwommen", "sein", None),
    ("come back", "comes back", "come back", "zurück|kommen", "zurückgekommen", "sein", None),
    ("dance", "dances", "danced", "tanzen", "getanzt", "haben", None),
    ("work", "works", "worked", "arbeiten", "gearbeitet", "haben", None),
    ("fall asleep", "falls asleep", "fallen asleep", "ein|schlafen", "eingeschlafen", "sein", ("schläfst", "schläft")),
    ("come", "comes", "come", "kommen", "gekommen", "sein", None),
    ("play", "plays", "played", "spielen", "gespielt", "haben", None),
    ("cry", "cries", "cried", "weinen", "geweint", "haben", None),
    ("go out", "goes out", "gone out", "aus|gehen", "ausgegangen", "sein", None),
    ("jump", "jumps", "jumped", "springen", "gesprungen", "sein", None),
    ("listen", "listens", "listened", "zu|hören", "zugehört", "haben", None),
    ("travel", "travels", "travelled", "reisen", "gereist", "sein", None),
    ("fly", "flies", "flown", "fliegen", "geflogen", "sein", None),
    ("rest", "rests", "rested", "ruhen", "geruht", "haben", None),
]
REPORTING = [("say", "says", "sagen"), ("think", "thinks", "denken"), ("know", "knows", "wissen"),
             ("believe", "believes", "glauben"), ("hope", "hopes", "hoffen")]
IRREGULAR_PRESENT = {  # ich, du, er, wir, sie(pl)
    "haben": ("habe", "hast", "hat", "haben", "haben"),
    "sein": ("bin", "bist", "ist", "sind", "sind"),
    "können": ("kann", "kannst", "kann", "können", "können"),
    "müssen": ("muss", "musst", "muss", "müssen", "müssen"),
    "wollen": ("will", "willst", "will", "wollen", "wollen"),
    "dürfen": ("darf", "darfst", "darf", "dürfen", "dürfen"),
    "wissen": ("weiß", "weißt", "weiß", "wissen", "wissen"),
}
MODALS = [("can", "can", "können"), ("must", "must", "müssen"), ("want to", "wants to", "wollen"),
          ("may", "may", "dürfen")]
# pronoun: English, German, person index into the (ich, du, er, wir, sie) forms, English 3sg?
PRONOUNS = [("I", "ich", 0, False), ("you", "du", 1, False), ("he", "er", 2, True),
            ("she", "sie", 2, True), ("we", "wir", 3, False), ("they", "sie", 4, False)]
PREPOSITIONS = [("in", "in"), ("with", "mit"), ("behind", "hinter"), ("under", "unter"),
                ("next to", "neben"), ("near", "bei"), ("in front of", "vor"), ("above", "über")]
CONTRACTIONS = {("in", "dem"): "im", ("bei", "dem"): "beim"}
MANNER = [("quickly", "schnell"), ("slowly", "langsam"), ("quietly", "leise"),
          ("carefully", "vorsichtig"), ("loudly", "laut"), ("gladly", "gern"), ("alone", "allein")]
TIME = [("today", "heute"), ("now", "jetzt"), ("often", "oft"), ("sometimes", "manchmal"),
        ("later", "später"), ("tomorrow", "morgen"), ("yesterday", "gestern")]
SUBORDINATORS = [("because", "weil"), ("although", "obwohl"), ("while", "während"), ("when", "wenn"),
                 ("before", "bevor"), ("if", "falls")]
