"""The public vocabularies of the synthetic census: category lists, states, ZIP ranges and names.

These lists are the *public* side of the demo dataset: the catalog declares the category lists as
key lists, so they must be fixed in code and never read off generated data. The education and
occupation categories are those of the UCI Adult data set, so queries written for Adult read the
same here. State populations are the 2020 US Census counts (in thousands) and are used only as
sampling weights; ZIP prefixes are the three-digit ranges the US Postal Service assigns to each
state, used only so that a generated ZIP code "looks like" its state. Names are common US given
names and surnames, combined at random: no generated person is a real one.
"""

from __future__ import annotations

SEXES: tuple[str, ...] = ("Female", "Male")
"""Values of the ``sex`` column, in key order."""

EDUCATION: tuple[str, ...] = (
    "Preschool",
    "1st-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th",
    "HS-grad",
    "Some-college",
    "Assoc-voc",
    "Assoc-acdm",
    "Bachelors",
    "Masters",
    "Prof-school",
    "Doctorate",
)
"""The 16 UCI Adult education levels, from least to most schooling."""

NOT_WORKING = "Not-working"
"""Occupation of everyone who works zero hours a week (children, retirees, the non-employed)."""

OCCUPATIONS: tuple[str, ...] = (
    "Tech-support",
    "Craft-repair",
    "Other-service",
    "Sales",
    "Exec-managerial",
    "Prof-specialty",
    "Handlers-cleaners",
    "Machine-op-inspct",
    "Adm-clerical",
    "Farming-fishing",
    "Transport-moving",
    "Priv-house-serv",
    "Protective-serv",
    "Armed-Forces",
    NOT_WORKING,
)
"""The 14 UCI Adult occupations, then :data:`NOT_WORKING` (UCI writes ``?`` for it)."""

STATES: tuple[tuple[str, int, tuple[tuple[int, int], ...]], ...] = (
    ("AL", 5024, ((350, 369),)),
    ("AK", 733, ((995, 999),)),
    ("AZ", 7152, ((850, 865),)),
    ("AR", 3012, ((716, 729),)),
    ("CA", 39538, ((900, 961),)),
    ("CO", 5774, ((800, 816),)),
    ("CT", 3606, ((60, 69),)),
    ("DE", 990, ((197, 199),)),
    ("FL", 21538, ((320, 349),)),
    ("GA", 10712, ((300, 319), (398, 399))),
    ("HI", 1455, ((967, 968),)),
    ("ID", 1839, ((832, 838),)),
    ("IL", 12812, ((600, 629),)),
    ("IN", 6786, ((460, 479),)),
    ("IA", 3190, ((500, 528),)),
    ("KS", 2938, ((660, 679),)),
    ("KY", 4506, ((400, 427),)),
    ("LA", 4658, ((700, 714),)),
    ("ME", 1362, ((39, 49),)),
    ("MD", 6177, ((206, 219),)),
    ("MA", 7030, ((10, 27),)),
    ("MI", 10077, ((480, 499),)),
    ("MN", 5706, ((550, 567),)),
    ("MS", 2961, ((386, 397),)),
    ("MO", 6154, ((630, 658),)),
    ("MT", 1084, ((590, 599),)),
    ("NE", 1962, ((680, 693),)),
    ("NV", 3105, ((889, 898),)),
    ("NH", 1378, ((30, 38),)),
    ("NJ", 9289, ((70, 89),)),
    ("NM", 2118, ((870, 884),)),
    ("NY", 20201, ((100, 149),)),
    ("NC", 10439, ((270, 289),)),
    ("ND", 779, ((580, 588),)),
    ("OH", 11799, ((430, 459),)),
    ("OK", 3959, ((730, 749),)),
    ("OR", 4237, ((970, 979),)),
    ("PA", 13003, ((150, 196),)),
    ("RI", 1097, ((28, 29),)),
    ("SC", 5118, ((290, 299),)),
    ("SD", 887, ((570, 577),)),
    ("TN", 6911, ((370, 385),)),
    ("TX", 29146, ((750, 799), (885, 885))),
    ("UT", 3272, ((840, 847),)),
    ("VT", 643, ((50, 59),)),
    ("VA", 8631, ((201, 201), (220, 246))),
    ("WA", 7705, ((980, 994),)),
    ("WV", 1794, ((247, 268),)),
    ("WI", 5894, ((530, 549),)),
    ("WY", 577, ((820, 831),)),
)
"""Each state: postal code, 2020 population in thousands, and 3-digit ZIP prefix ranges."""

STATE_CODES: tuple[str, ...] = tuple(code for code, _, _ in STATES)
"""The 50 state postal codes, in :data:`STATES` order."""

FEMALE_NAMES: tuple[str, ...] = (
    "James", "Robert", "John", "Michael", "David", "William", "Richard", "Joseph", "Thomas",
    "Christopher", "Charles", "Daniel", "Matthew", "Anthony", "Mark", "Donald", "Steven", "Andrew",
    "Paul", "Joshua", "Kenneth", "Kevin", "Brian", "George", "Timothy", "Ronald", "Jason",
    "Edward", "Jeffrey", "Ryan", "Jacob", "Gary", "Nicholas", "Eric", "Jonathan", "Stephen",
    "Larry", "Justin", "Scott", "Brandon", "Benjamin", "Samuel", "Gregory", "Alexander", "Patrick",
    "Frank", "Raymond", "Jack", "Dennis", "Jerry", "Tyler", "Aaron", "Jose", "Adam", "Nathan",
    "Henry", "Zachary", "Douglas", "Peter", "Kyle", "Noah", "Ethan", "Jeremy", "Walter",
    "Christian", "Keith", "Roger", "Terry", "Austin", "Sean", "Gerald", "Carl", "Harold", "Dylan",
    "Arthur", "Lawrence", "Jordan", "Jesse", "Bryan", "Billy", "Bruce", "Gabriel", "Joe", "Logan",
    "Alan", "Juan", "Albert", "Willie", "Elijah", "Wayne", "Randy", "Vincent", "Mason", "Roy",
    "Ralph", "Bobby", "Russell", "Bradley", "Philip", "Eugene",
)  # fmt: skip
"""Common US female given names, most frequent first."""

MALE_NAMES: tuple[str, ...] = (
    "James", "Robert", "John", "Michael", "David", "William", "Richard", "Joseph", "Thomas",
    "Christopher", "Charles", "Daniel", "Matthew", "Anthony", "Mark", "Donald", "Steven", "Andrew",
    "Paul", "Joshua", "Kenneth", "Kevin", "Brian", "George", "Timothy", "Ronald", "Jason",
    "Edward", "Jeffrey", "Ryan", "Jacob", "Gary", "Nicholas", "Eric", "Jonathan", "Stephen",
    "Larry", "Justin", "Scott", "Brandon", "Benjamin", "Samuel", "Gregory", "Alexander", "Patrick",
    "Frank", "Raymond", "Jack", "Dennis", "Jerry", "Tyler", "Aaron", "Jose", "Adam", "Nathan",
    "Henry", "Zachary", "Douglas", "Peter", "Kyle", "Noah", "Ethan", "Jeremy", "Walter",
    "Christian", "Keith", "Roger", "Terry", "Austin", "Sean", "Gerald", "Carl", "Harold", "Dylan",
    "Arthur", "Lawrence", "Jordan", "Jesse", "Bryan", "Billy", "Bruce", "Gabriel", "Joe", "Logan",
    "Alan", "Juan", "Albert", "Willie", "Elijah", "Wayne", "Randy", "Vincent", "Mason", "Roy",
    "Ralph", "Bobby", "Russell", "Bradley", "Philip", "Eugene",
)  # fmt: skip
"""Common US male given names, most frequent first."""

SURNAMES: tuple[str, ...] = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez",
    "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor",
    "Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez",
    "Clark", "Ramirez", "Lewis", "Robinson", "Walker", "Young", "Allen", "King", "Wright", "Scott",
    "Torres", "Nguyen", "Hill", "Flores", "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera",
    "Campbell", "Mitchell", "Carter", "Roberts", "Gomez", "Phillips", "Evans", "Turner", "Diaz",
    "Parker", "Cruz", "Edwards", "Collins", "Reyes", "Stewart", "Morris", "Morales", "Murphy",
    "Cook", "Rogers", "Gutierrez", "Ortiz", "Morgan", "Cooper", "Peterson", "Bailey", "Reed",
    "Kelly", "Howard", "Ramos", "Kim", "Cox", "Ward", "Richardson", "Watson", "Brooks", "Chavez",
    "Wood", "James", "Bennett", "Gray", "Mendoza", "Ruiz", "Hughes", "Price", "Alvarez",
    "Castillo", "Sanders", "Patel", "Myers", "Long", "Ross", "Foster", "Jimenez", "Powell",
    "Jenkins", "Perry", "Russell", "Sullivan", "Bell", "Coleman", "Butler", "Henderson", "Barnes",
    "Gonzales", "Fisher", "Vasquez", "Simmons", "Romero", "Jordan", "Patterson", "Alexander",
    "Hamilton", "Graham", "Reynolds", "Griffin", "Wallace", "Moreno", "West", "Cole", "Hayes",
    "Bryant", "Herrera", "Gibson", "Ellis", "Tran", "Medina", "Aguilar", "Stevens", "Murray",
    "Ford", "Castro", "Marshall", "Owens", "Harrison", "Fernandez", "McDonald", "Woods",
    "Washington", "Kennedy", "Wells", "Vargas", "Henry", "Chen", "Freeman", "Webb", "Tucker",
    "Guzman", "Burns", "Crawford", "Olson", "Simpson", "Porter", "Hunter", "Gordon", "Mendez",
    "Silva", "Shaw", "Snyder", "Mason", "Dixon", "Munoz", "Hunt", "Hicks", "Holmes", "Palmer",
    "Wagner", "Black", "Robertson", "Boyd", "Rose", "Stone", "Salazar", "Fox", "Warren", "Mills",
    "Meyer", "Rice", "Schmidt", "Garza", "Daniels", "Ferguson", "Nichols", "Stephens", "Soto",
    "Weaver", "Ryan", "Gardner", "Payne", "Grant", "Dunn", "Kelley", "Spencer", "Hawkins",
)  # fmt: skip
"""Common US surnames, most frequent first."""
