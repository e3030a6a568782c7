"""Static data of the ALFWorld-style households: rooms, receptacles, object types, tasks.

Everything here is plain constants; :mod:`rockroll.envs.alfworld.generator` draws households from it.
Names follow ALFWorld's (lower-case ALFRED class names: ``sinkbasin``, ``stoveburner``,
``desklamp``...).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "TASK_TYPES",
    "TASK_ALIASES",
    "TASK_TEMPLATES",
    "OPENABLE",
    "CLEANERS",
    "HEATERS",
    "COOLERS",
    "LIGHTS",
    "LIGHT_HOSTS",
    "RoomType",
    "ROOM_TYPES",
    "ObjectType",
    "OBJECT_TYPES",
    "TASK_APPLIANCES",
    "TASK_PROPERTY",
    "TASK_ROOMS",
]

#: the six ALFWorld task types, in ALFWorld's order (its config numbers them 1..6)
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

#: short names accepted by the ``task_types`` kwarg
TASK_ALIASES: dict[str, str] = {
    "pick": "pick_and_place_simple",
    "look": "look_at_obj_in_light",
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
    "pick_two": "pick_two_obj_and_place",
}

#: goal phrasings per task type ({obj}, {recep}, {light} are filled in)
TASK_TEMPLATES: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("put a {obj} in {recep}.", "put some {obj} on {recep}."),
    "look_at_obj_in_light": ("look at {obj} under the {light}.", "examine the {obj} with the {light}."),
    "pick_clean_then_place_in_recep": ("put a clean {obj} in {recep}.", "clean some {obj} and put it in {recep}."),
    "pick_heat_then_place_in_recep": ("put a hot {obj} in {recep}.", "heat some {obj} and put it in {recep}."),
    "pick_cool_then_place_in_recep": ("put a cool {obj} in {recep}.", "cool some {obj} and put it in {recep}."),
    "pick_two_obj_and_place": ("put two {obj} in {recep}.", "find two {obj} and put them in {recep}."),
}

#: receptacles with a door: closed at the start, their contents hidden until opened
OPENABLE: frozenset[str] = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})
#: receptacle kinds that clean / heat / cool a held object
CLEANERS: frozenset[str] = frozenset({"sinkbasin", "bathtubbasin"})
HEATERS: frozenset[str] = frozenset({"microwave"})
COOLERS: frozenset[str] = frozenset({"fridge"})
#: light sources (objects that ``use`` switches on and off)
LIGHTS: tuple[str, ...] = ("desklamp", "floorlamp")
#: where each light stands: a desklamp sits on its host, a floorlamp stands next to it
LIGHT_HOSTS: dict[str, tuple[str, ...]] = {
    "desklamp": ("desk", "sidetable", "dresser"),
    "floorlamp": ("sidetable", "sofa", "armchair", "dresser", "coffeetable"),
}

#: task type -> the receptacle kinds its middle step needs (None: no appliance)
TASK_APPLIANCES: dict[str, frozenset[str] | None] = {
    "pick_and_place_simple": None,
    "look_at_obj_in_light": None,
    "pick_clean_then_place_in_recep": CLEANERS,
    "pick_heat_then_place_in_recep": HEATERS,
    "pick_cool_then_place_in_recep": COOLERS,
    "pick_two_obj_and_place": None,
}
#: task type -> the object state the goal asks for (None: any state)
TASK_PROPERTY: dict[str, str | None] = {
    "pick_and_place_simple": None,
    "look_at_obj_in_light": None,
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "hot",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": None,
}
#: task type -> room types that can host it
TASK_ROOMS: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "look_at_obj_in_light": ("livingroom", "bedroom"),
    "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
    "pick_heat_then_place_in_recep": ("kitchen",),
    "pick_cool_then_place_in_recep": ("kitchen",),
    "pick_two_obj_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
}


@dataclass(frozen=True)
class RoomType:
    """A kind of room.

    Attributes:
        name: ``kitchen``, ``livingroom``, ``bedroom`` or ``bathroom``.
        required: receptacle kinds every such room has (one of each).
        optional: kind -> how many more of it the room may have.
        size: default (min, max) number of receptacles.
        objects: object types found in this room.
        lights: light types this room may have (one is placed when non-empty).
    """

    name: str
    required: tuple[str, ...]
    optional: tuple[tuple[str, int], ...]
    size: tuple[int, int]
    objects: tuple[str, ...]
    lights: tuple[str, ...] = ()


ROOM_TYPES: dict[str, RoomType] = {
    r.name: r
    for r in (
        RoomType(
            "kitchen",
            (
                "cabinet",
                "coffeemachine",
                "countertop",
                "drawer",
                "fridge",
                "garbagecan",
                "microwave",
                "sinkbasin",
                "stoveburner",
            ),
            (
                ("cabinet", 12),
                ("drawer", 8),
                ("countertop", 2),
                ("stoveburner", 3),
                ("diningtable", 2),
                ("shelf", 3),
                ("toaster", 1),
            ),
            (14, 28),
            (
                "apple",
                "bread",
                "butterknife",
                "bowl",
                "cup",
                "dishsponge",
                "egg",
                "fork",
                "kettle",
                "knife",
                "ladle",
                "lettuce",
                "mug",
                "pan",
                "peppershaker",
                "plate",
                "pot",
                "potato",
                "saltshaker",
                "soapbottle",
                "spatula",
                "spoon",
                "tomato",
                "winebottle",
                "creditcard",
                "cellphone",
            ),
        ),
        RoomType(
            "livingroom",
            ("coffeetable", "garbagecan", "sidetable", "sofa"),
            (
                ("armchair", 2),
                ("sidetable", 2),
                ("shelf", 6),
                ("drawer", 6),
                ("cabinet", 4),
                ("dresser", 1),
                ("diningtable", 1),
                ("ottoman", 1),
                ("tvstand", 1),
            ),
            (8, 20),
            (
                "box",
                "creditcard",
                "keychain",
                "laptop",
                "newspaper",
                "pillow",
                "remotecontrol",
                "statue",
                "vase",
                "watch",
                "tissuebox",
                "plate",
                "book",
                "cellphone",
            ),
            ("floorlamp", "desklamp"),
        ),
        RoomType(
            "bedroom",
            ("bed", "desk", "drawer", "garbagecan"),
            (
                ("drawer", 8),
                ("sidetable", 2),
                ("dresser", 1),
                ("shelf", 6),
                ("safe", 1),
                ("laundryhamper", 1),
                ("armchair", 1),
            ),
            (8, 20),
            (
                "alarmclock",
                "book",
                "cd",
                "cellphone",
                "creditcard",
                "keychain",
                "laptop",
                "mug",
                "pen",
                "pencil",
                "pillow",
                "bowl",
                "baseballbat",
                "basketball",
                "tennisracket",
                "teddybear",
            ),
            ("desklamp",),
        ),
        RoomType(
            "bathroom",
            ("cabinet", "countertop", "garbagecan", "sinkbasin", "toilet"),
            (
                ("cabinet", 4),
                ("drawer", 4),
                ("bathtubbasin", 1),
                ("handtowelholder", 2),
                ("towelholder", 1),
                ("toiletpaperhanger", 1),
                ("shelf", 3),
                ("sinkbasin", 1),
            ),
            (8, 16),
            (
                "candle",
                "cloth",
                "handtowel",
                "soapbar",
                "soapbottle",
                "spraybottle",
                "tissuebox",
                "toiletpaper",
                "towel",
                "plunger",
                "scrubbrush",
            ),
        ),
    )
}


@dataclass(frozen=True)
class ObjectType:
    """A kind of portable object.

    Attributes:
        name: e.g. ``mug``.
        places: receptacle kinds it is found in and that goals ask it to be put in.
        clean, heat, cool: whether ``clean``/``heat``/``cool`` work on it.
        look: whether it can be the object of an examine-in-light task.
    """

    name: str
    places: tuple[str, ...]
    clean: bool = False
    heat: bool = False
    cool: bool = False
    look: bool = False


_FOOD = ("countertop", "diningtable", "fridge", "garbagecan", "microwave", "sinkbasin")
_DISH = ("countertop", "diningtable", "cabinet", "sinkbasin", "fridge", "microwave", "shelf")
_CUTLERY = ("countertop", "diningtable", "drawer", "sinkbasin")
_COOKWARE = ("stoveburner", "countertop", "cabinet", "sinkbasin", "diningtable")
_SHAKER = ("countertop", "diningtable", "cabinet", "drawer", "shelf")
_SMALL = ("desk", "sidetable", "drawer", "dresser", "shelf")
_DECOR = ("shelf", "coffeetable", "sidetable", "tvstand", "dresser", "diningtable", "desk")
_SOFT = ("bed", "sofa", "armchair")
_BATH = ("countertop", "cabinet", "shelf", "toilet")

OBJECT_TYPES: dict[str, ObjectType] = {
    o.name: o
    for o in (
        ObjectType("apple", _FOOD, clean=True, heat=True, cool=True),
        ObjectType("bread", ("countertop", "diningtable", "fridge", "microwave"), heat=True, cool=True),
        ObjectType("egg", _FOOD, clean=True, heat=True, cool=True),
        ObjectType("lettuce", ("countertop", "diningtable", "fridge", "sinkbasin"), clean=True, cool=True),
        ObjectType("potato", _FOOD, clean=True, heat=True, cool=True),
        ObjectType("tomato", _FOOD, clean=True, heat=True, cool=True),
        ObjectType("mug", (*_DISH, "coffeemachine", "desk", "sidetable"), clean=True, heat=True, cool=True, look=True),
        ObjectType("cup", _DISH, clean=True, heat=True, cool=True),
        ObjectType("plate", (*_DISH, "coffeetable"), clean=True, heat=True, cool=True),
        ObjectType("bowl", (*_DISH, "desk", "sidetable"), clean=True, cool=True, look=True),
        ObjectType("pan", (*_COOKWARE, "fridge"), clean=True, cool=True),
        ObjectType("pot", (*_COOKWARE, "fridge", "shelf"), clean=True, cool=True),
        ObjectType("kettle", (*_COOKWARE, "shelf"), clean=True),
        ObjectType("fork", _CUTLERY, clean=True),
        ObjectType("spoon", _CUTLERY, clean=True),
        ObjectType("knife", _CUTLERY, clean=True),
        ObjectType("butterknife", _CUTLERY, clean=True),
        ObjectType("spatula", _CUTLERY, clean=True),
        ObjectType("ladle", _CUTLERY, clean=True),
        ObjectType("dishsponge", (*_CUTLERY, "cabinet", "shelf"), clean=True),
        ObjectType("saltshaker", _SHAKER),
        ObjectType("peppershaker", _SHAKER),
        ObjectType("winebottle", ("countertop", "diningtable", "fridge", "cabinet", "shelf"), cool=True),
        ObjectType("soapbottle", (*_BATH, "diningtable", "garbagecan")),
        ObjectType("soapbar", (*_BATH, "sinkbasin", "bathtubbasin", "garbagecan"), clean=True),
        ObjectType("cloth", (*_BATH, "sinkbasin", "bathtubbasin", "drawer"), clean=True),
        ObjectType("spraybottle", (*_BATH, "garbagecan")),
        ObjectType("toiletpaper", (*_BATH, "toiletpaperhanger", "drawer")),
        ObjectType("candle", _BATH),
        ObjectType("handtowel", ("handtowelholder", "countertop", "cabinet")),
        ObjectType("towel", ("towelholder", "bathtubbasin", "cabinet")),
        ObjectType("plunger", ("cabinet", "toilet", "garbagecan")),
        ObjectType("scrubbrush", ("cabinet", "toilet", "garbagecan")),
        ObjectType("tissuebox", ("countertop", "toilet", "shelf", "coffeetable", "sidetable", "dresser", "desk")),
        ObjectType("alarmclock", ("desk", "sidetable", "dresser", "shelf"), look=True),
        ObjectType("book", (*_SMALL, "bed", "sofa", "coffeetable"), look=True),
        ObjectType("cd", (*_SMALL, "safe", "garbagecan"), look=True),
        ObjectType("cellphone", (*_SMALL, "bed", "sofa", "safe", "countertop", "diningtable"), look=True),
        ObjectType("creditcard", (*_SMALL, "coffeetable", "countertop", "diningtable", "armchair"), look=True),
        ObjectType("keychain", (*_SMALL, "safe", "coffeetable", "sofa", "armchair"), look=True),
        ObjectType("laptop", ("desk", "bed", "sofa", "coffeetable", "diningtable", "armchair"), look=True),
        ObjectType("pen", (*_SMALL, "garbagecan"), look=True),
        ObjectType("pencil", (*_SMALL, "garbagecan"), look=True),
        ObjectType("pillow", _SOFT, look=True),
        ObjectType("remotecontrol", ("sofa", "coffeetable", "sidetable", "armchair", "tvstand", "dresser"), look=True),
        ObjectType("newspaper", ("sofa", "coffeetable", "sidetable", "armchair", "diningtable", "ottoman"), look=True),
        ObjectType("statue", _DECOR, look=True),
        ObjectType("vase", _DECOR, look=True),
        ObjectType("watch", (*_SMALL, "coffeetable", "safe"), look=True),
        ObjectType(
            "box", ("coffeetable", "sidetable", "shelf", "dresser", "desk", "sofa", "armchair", "ottoman"), look=True
        ),
        ObjectType("baseballbat", ("bed", "desk", "shelf")),
        ObjectType("basketball", ("bed", "desk", "armchair", "shelf")),
        ObjectType("tennisracket", ("bed", "desk", "shelf")),
        ObjectType("teddybear", ("bed", "armchair", "shelf", "dresser")),
    )
}
