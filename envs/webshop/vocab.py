"""Word tables the catalogue generator draws from: categories, product types, attributes, options.

Each product type is one line of a department's table:
``name | sub-category | min-max price in dollars | attributes | option pools | use phrases``
(lists comma-separated). A product mixes the type's own attributes with its department's
shared ones. Option pools map a pool key to the option's display name and its values.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TypeSpec", "Category", "CATEGORIES", "OPTION_POOLS", "BRAND_HEADS", "BRAND_TAILS"]


@dataclass(frozen=True)
class TypeSpec:
    """One product type (the goal's "target product type")."""

    name: str
    sub: str
    price: tuple[float, float]
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    uses: tuple[str, ...]


@dataclass(frozen=True)
class Category:
    """A top-level shop department."""

    key: str
    root: str
    attributes: tuple[str, ...]
    blurbs: tuple[str, ...]
    types: tuple[TypeSpec, ...]


def _types(table: str) -> tuple[TypeSpec, ...]:
    """Parse a department's product-type table (see the module docstring)."""
    out = []
    for line in table.strip().splitlines():
        name, sub, price, attrs, options, uses = (cell.strip() for cell in line.split("|"))
        lo, hi = (float(x) for x in price.split("-"))
        split = [tuple(x.strip() for x in cell.split(",") if x.strip()) for cell in (attrs, options, uses)]
        out.append(TypeSpec(name, sub, (lo, hi), *split))
    return tuple(out)


_COLORS = (
    "black", "white", "navy blue", "grey", "red", "beige", "olive green", "pink", "brown",
    "burgundy", "light blue", "khaki", "purple", "teal",
)  # fmt: skip
_FINISHES = ("walnut", "oak", "white", "black", "espresso", "rustic brown", "grey wash", "natural")
_FLAVORS = ("original", "chocolate", "vanilla", "strawberry", "sea salt", "honey", "peanut butter", "cinnamon")
_PACKS = ("pack of 1", "pack of 2", "pack of 3", "pack of 4", "pack of 6", "pack of 12")

OPTION_POOLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "color": ("color", _COLORS),
    "finish": ("color", _FINISHES),
    "apparel_size": ("size", ("x-small", "small", "medium", "large", "x-large", "xx-large")),
    "shoe_size": ("size", ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "11", "12")),
    "jeans_size": ("size", ("28w x 30l", "30w x 30l", "32w x 32l", "34w x 32l", "36w x 34l", "38w x 34l")),
    "denim": ("color", ("light wash", "medium wash", "dark wash", "black", "stone wash")),
    "liquid_size": ("size", ("3.4 fl oz", "8 fl oz", "12 fl oz", "16 fl oz", "32 fl oz")),
    "scent": ("scent", ("lavender", "unscented", "coconut", "citrus", "eucalyptus mint", "vanilla", "rose")),
    "palette": ("color", ("nude", "smoky", "warm tones", "cool tones", "rose gold", "sunset")),
    "pack": ("size", _PACKS),
    "flavor": ("flavor", _FLAVORS),
    "tea_flavor": ("flavor", ("jasmine", "mint", "lemon", "ginger", "original", "peach")),
    "snack_flavor": ("flavor", ("original", "teriyaki", "peppered", "sweet and spicy", "hickory smoked")),
    "sauce_flavor": ("flavor", ("marinara", "tomato basil", "arrabbiata", "roasted garlic", "mushroom")),
    "choc_flavor": ("flavor", ("sea salt", "almond", "orange", "mint", "raspberry", "espresso")),
    "weight": ("size", ("8 ounce", "12 ounce", "1 pound", "2 pound", "5 pound")),
    "oil_size": ("size", ("16.9 fl oz", "25.3 fl oz", "33.8 fl oz", "101 fl oz")),
    "phone": ("model", ("iphone 14", "iphone 15", "iphone 15 pro", "galaxy s23", "galaxy s24", "pixel 8")),
    "cable_length": ("size", ("3 feet", "6 feet", "10 feet", "15 feet", "25 feet")),
    "capacity": ("capacity", ("5000mah", "10000mah", "20000mah", "26800mah")),
    "band": ("size", ("38mm", "41mm", "44mm", "45mm")),
    "storage": ("capacity", ("64gb", "128gb", "256gb", "512gb")),
    "resolution": ("style", ("1080p", "2k", "4k")),
    "bed_size": ("size", ("twin", "full", "queen", "king", "california king")),
    "pillow_size": ("size", ("16x16 inch", "18x18 inch", "20x20 inch", "12x20 inch")),
    "curtain_size": ("size", ("36x72 inch", "72x72 inch", "72x84 inch", "52x63 inch", "52x84 inch")),
    "mug_size": ("size", ("12 ounce", "16 ounce", "20 ounce")),
    "rug_size": ("size", ("2x3 feet", "3x5 feet", "5x7 feet", "8x10 feet", "2x8 runner")),
    "board_size": ("size", ("small", "medium", "large", "set of 3")),
    "width": ("size", ("40 inch", "47 inch", "55 inch", "63 inch", "70 inch")),
    "stool_height": ("size", ("24 inch", "26 inch", "30 inch")),
}

BRAND_HEADS = (
    "Lumi", "Bright", "Nova", "Terra", "Puri", "Cozy", "Urban", "Zen", "Alpen", "Blue", "Oak", "Sun",
    "Vita", "Evo", "Aero", "True", "Silver", "Maple", "Coral", "North", "Iron", "Willow", "Amber", "Luna",
)  # fmt: skip
BRAND_TAILS = ("ra", "well", "line", "nest", "core", "lab", "field", "stone", "ly", "wave", "mark", "haus", "vale")

# fmt: off
_BEAUTY = """
shampoo | Hair Care | 6-28 | sulfate free, dry hair, hair growth, color safe, argan oil, volumizing | liquid_size, scent | for dry damaged hair, for curly hair, for men and women, for daily use
conditioner | Hair Care | 6-28 | sulfate free, dry hair, frizz control, color safe, coconut oil, detangling | liquid_size, scent | for dry damaged hair, for curly hair, for fine hair, for daily use
hair oil | Hair Care | 8-35 | argan oil, hair growth, frizz control, heat protection, lightweight formula | liquid_size, scent | for split ends, for all hair types, for shiny hair
face moisturizer | Skin Care | 10-45 | hyaluronic acid, dry skin, oily skin, anti aging, fine lines, spf 30 | liquid_size, pack | for sensitive skin, for men and women, for day and night
sunscreen | Skin Care | 8-30 | spf 50, water resistant, reef safe, broad spectrum, oil free, non greasy | liquid_size, pack | for face and body, for kids, for sport
lip balm | Skin Care | 3-15 | shea butter, beeswax, spf 15, long lasting, dry lips | pack, scent | for chapped lips, for kids and adults
body wash | Bath & Body | 5-25 | sensitive skin, moisturizing, tea tree oil, coconut oil, sulfate free, exfoliating | liquid_size, scent | for men, for women, for the whole family
eyeshadow palette | Makeup | 8-40 | long lasting, highly pigmented, matte finish, shimmer finish, easy blend | palette | for everyday looks, for evening makeup
nail polish | Makeup | 4-18 | quick dry, long lasting, chip resistant, gel finish, non toxic | color, pack | for home manicure, for salon results
"""

_FASHION = """
t-shirt | Tops & Tees | 8-30 | short sleeve, crew neck, cotton blend, regular fit, tagless, moisture wicking | color, apparel_size | for men, for women, for workouts, for casual wear
hoodie | Hoodies & Sweatshirts | 20-60 | pullover, fleece lined, kangaroo pocket, drawstring hood, long sleeve, relaxed fit | color, apparel_size | for men, for women, for cold days
jeans | Jeans | 25-80 | slim fit, straight leg, stretch denim, button closure, high waist, classic fit | denim, jeans_size | for men, for women, for work and weekend
dress | Dresses | 20-70 | v neck, a line, short sleeve, floral print, midi length, with pockets | color, apparel_size | for summer, for women, for parties
running shoes | Shoes | 40-120 | breathable mesh, rubber sole, non slip, arch support, lace up, cushioned | color, shoe_size | for men, for women, for road running, for gym training
sandals | Shoes | 15-50 | open toe, ankle strap, arch support, non slip, memory foam, quick drying | color, shoe_size | for women, for men, for the beach
socks | Socks & Hosiery | 8-25 | moisture wicking, cushioned sole, ankle length, arch compression, cotton blend | color, pack | for men, for women, for hiking
leggings | Active Leggings | 15-45 | high waist, tummy control, squat proof, four way stretch, with pockets | color, apparel_size | for women, for yoga, for running
winter jacket | Coats & Jackets | 45-150 | water resistant, windproof, detachable hood, fleece lined, zip closure | color, apparel_size | for men, for women, for hiking and skiing
baseball cap | Hats & Caps | 10-30 | adjustable strap, cotton twill, breathable, sun protection, embroidered logo | color | for men, for women, for outdoor sports
"""

_GROCERY = """
coffee beans | Coffee | 10-35 | whole bean, medium roast, dark roast, single origin, fair trade, low acid | weight, pack | for espresso, for drip coffee, for french press
green tea | Tea | 5-25 | loose leaf, tea bags, decaf, antioxidant rich, caffeine boost | tea_flavor, pack | for iced tea, for an afternoon break
granola | Breakfast Foods | 5-20 | whole grain, high fiber, low sugar, crunchy clusters, no artificial flavors | flavor, pack | for breakfast, for yogurt bowls
protein bars | Snack Foods | 12-40 | high protein, low sugar, keto friendly, individually wrapped, low carb | flavor, pack | for workouts, for busy mornings
dark chocolate | Candy & Chocolate | 4-25 | high cacao, dairy free, sugar free, fair trade, individually wrapped | choc_flavor, pack | for gifting, for baking
mixed nuts | Snack Foods | 8-30 | unsalted, roasted, lightly salted, resealable bag, high protein | weight, pack | for snacking, for trail mix
olive oil | Cooking Oils | 10-40 | extra virgin, cold pressed, single origin, glass bottle, first harvest | oil_size, pack | for cooking, for salads
honey | Pantry Staples | 8-30 | raw, unfiltered, pure, glass jar, wildflower | weight, pack | for tea, for baking
beef jerky | Jerky & Dried Meats | 8-35 | high protein, low fat, ready to eat, grass fed, no preservatives | snack_flavor, pack | for hiking, for road trips
pasta sauce | Sauces | 4-20 | no sugar added, low sodium, vegan, keto friendly, slow simmered | sauce_flavor, pack | for pasta night, for pizza
"""

_ELECTRONICS = """
wireless earbuds | Headphones | 20-120 | noise cancelling, long battery life, bluetooth 5.3, charging case, water resistant | color | for running, for calls, for travel
bluetooth speaker | Portable Speakers | 20-150 | waterproof, long battery life, deep bass, stereo pairing, built in microphone | color | for outdoor parties, for the shower, for camping
phone case | Cell Phone Cases | 8-30 | shockproof, slim fit, wireless charging compatible, raised edges, drop protection | phone, color | for everyday protection
usb c charger | Chargers | 10-45 | fast charging, dual port, foldable plug, compact design, overheat protection | color, pack | for phones and tablets, for laptops
hdmi cable | Cables | 6-25 | 4k 60hz, high speed, braided nylon, gold plated, ethernet support | cable_length, pack | for tv and monitor, for gaming consoles
power bank | Chargers | 15-60 | fast charging, high capacity, usb c, led display, dual output | capacity, color | for travel, for camping
smart watch | Wearable Technology | 30-200 | heart rate monitor, sleep tracking, water resistant, long battery life, gps | color, band | for fitness, for android and iphone
tablet | Computers & Tablets | 80-400 | hd display, long battery life, octa core processor, expandable storage | storage, color | for kids, for streaming, for work
webcam | Computer Accessories | 20-90 | full hd, built in microphone, auto focus, privacy cover, wide angle | resolution | for video calls, for streaming
wireless mouse | Computer Accessories | 8-50 | ergonomic design, silent click, rechargeable, usb receiver, adjustable dpi | color | for laptop, for office
"""

_HOME = """
bed sheets | Bedding | 20-80 | deep pocket, microfiber, wrinkle resistant, breathable, hypoallergenic, cooling | color, bed_size | for all seasons, for hot sleepers
throw pillow covers | Decorative Pillows | 8-30 | zipper closure, soft velvet, machine washable, double sided | color, pillow_size | for couch, for bedroom
shower curtain | Bath | 10-35 | waterproof, mildew resistant, machine washable, heavy weight, hooks included | color, curtain_size | for bathroom
coffee mug | Drinkware | 8-30 | dishwasher safe, microwave safe, ceramic, large capacity, insulated | color, mug_size | for coffee and tea, for office
storage baskets | Storage & Organization | 12-45 | foldable, with handles, woven, collapsible, durable | color, pack | for shelves, for closet, for nursery
area rug | Rugs | 30-200 | non shedding, non slip backing, stain resistant, low pile, machine washable | color, rug_size | for living room, for bedroom, for hallway
desk lamp | Lighting | 15-60 | dimmable, led, usb charging port, eye caring, touch control, adjustable arm | color | for home office, for reading
bath towels | Bath | 15-60 | quick drying, highly absorbent, soft, cotton, hotel quality | color, pack | for bathroom, for gym
blackout curtains | Window Treatments | 15-55 | thermal insulated, noise reducing, grommet top, energy saving | color, curtain_size | for bedroom, for living room
cutting board | Kitchen & Dining | 10-45 | bamboo, juice groove, dishwasher safe, non slip, reversible | board_size | for meat and vegetables, for serving
"""

_FURNITURE = """
bookshelf | Bookcases | 40-180 | 5 tier, industrial style, metal frame, open shelf, wall anchor | finish | for living room, for home office
office chair | Home Office Chairs | 60-250 | lumbar support, height adjustable, ergonomic, swivel, padded armrests | color | for home office, for gaming
coffee table | Living Room Furniture | 50-220 | storage shelf, mid century, solid wood, lift top, round top | finish | for living room, for small spaces
tv stand | TV & Media Furniture | 60-250 | storage cabinet, cable management, mid century, solid wood, open shelves | finish, width | for living room, for bedroom
bar stools | Kitchen Furniture | 40-200 | counter height, swivel, backrest, footrest, faux leather | color, stool_height | for kitchen island, for pub
nightstand | Bedroom Furniture | 30-120 | with drawer, storage space, charging station, solid wood | finish, pack | for bedroom, for small spaces
shoe rack | Entryway Furniture | 15-70 | 4 tier, stackable, metal frame, non woven fabric | color | for entryway, for closet
computer desk | Home Office Desks | 50-250 | writing desk, storage shelves, metal frame, monitor stand | finish, width | for home office, for small spaces
"""
# fmt: on

CATEGORIES: tuple[Category, ...] = (
    Category(
        "beauty",
        "Beauty & Personal Care",
        ("paraben free", "cruelty free", "natural ingredients", "dermatologist tested", "vegan", "travel size"),
        ("Gentle enough for everyday use.", "Formulated and bottled in small batches.", "Free from harsh chemicals."),
        _types(_BEAUTY),
    ),
    Category(
        "fashion",
        "Clothing, Shoes & Jewelry",
        ("machine wash", "soft fabric", "everyday wear", "all season", "lightweight"),
        (
            "Cut for a comfortable everyday fit.",
            "Colours stay bright wash after wash.",
            "Check the size chart before ordering.",
        ),
        _types(_FASHION),
    ),
    Category(
        "grocery",
        "Grocery & Gourmet Food",
        ("gluten free", "non gmo", "organic", "kosher", "plant based"),
        (
            "Packed fresh in a resealable container.",
            "Sourced from trusted growers.",
            "Great for sharing or snacking on the go.",
        ),
        _types(_GROCERY),
    ),
    Category(
        "electronics",
        "Electronics",
        ("easy to use", "high performance", "durable", "plug and play", "portable"),
        ("Backed by a one-year warranty.", "Tested for safety and reliability.", "Works with most phones and laptops."),
        _types(_ELECTRONICS),
    ),
    Category(
        "home",
        "Home & Kitchen",
        ("easy clean", "eco friendly", "modern design", "long lasting", "high quality"),
        ("Adds a cosy touch to any room.", "Designed for everyday family life.", "Ships in plastic-free packaging."),
        _types(_HOME),
    ),
    Category(
        "furniture",
        "Home & Kitchen",
        ("easy assemble", "living room", "heavy duty", "space saving", "modern style"),
        ("Sturdy construction for years of use.", "Tools and instructions included.", "Wipe clean with a damp cloth."),
        _types(_FURNITURE),
    ),
)
