"""Tests of WebShop-v0: catalogue, loader, search, pages, reward, forking, oracle and random play."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import rockroll.envhub as envhub
from rockroll.envs.errors import EnvConfigError, ResetNeeded, StateError
from rockroll.envs.webshop import Goal, Product, WebShopEnv, WebShopOracle, score_purchase
from rockroll.envs.webshop.generator import generate_catalog
from rockroll.envs.webshop.goals import parse_price_upper
from rockroll.envs.webshop.loader import load_catalog_file
from rockroll.envs.webshop.oracle import best_options
from rockroll.envs.webshop.store import open_shop


def answer(action: str) -> str:
    return f"<answer>{action}</answer>"


@pytest.fixture(scope="module")
def env() -> WebShopEnv:
    return WebShopEnv()


def run_oracle(env, seed: int) -> tuple[float, dict, int]:
    oracle = WebShopOracle()
    env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(oracle.act(env))
        steps += 1
        done = terminated or truncated
    return reward, info, steps


# ------------------------------------------------------------------ registry and catalogue
def test_registered() -> None:
    spec = envhub.spec("WebShop-v0")
    assert spec.max_steps == 15
    assert {"web", "shopping"} <= set(spec.tags)
    wrapped = envhub.make("WebShop-v0")
    obs, info = wrapped.reset(seed=0)
    assert "Instruction:" in obs and info["page"] == "search"


def test_catalog_is_deterministic_and_shop_like() -> None:
    a, b, c = generate_catalog(1000, 0), generate_catalog(1000, 0), generate_catalog(1000, 1)
    assert len(a) == 1000 and a.products == b.products and a.products != c.products
    assert len({p.asin for p in a.products}) == 1000
    assert len({p.product_type for p in a.products}) >= 40
    for p in a.products:
        assert p.title and p.description and p.features and len(p.attributes) >= 2
        assert 0 < p.price < 1000 and " › " in p.product_category
        assert all(len(v) >= 2 for v in p.options.values())


def test_shop_is_cached_per_catalog() -> None:
    e1, e2 = WebShopEnv(num_products=300, catalog_seed=5), WebShopEnv(num_products=300, catalog_seed=5)
    assert e1.shop is e2.shop
    assert WebShopEnv(num_products=300, catalog_seed=6).shop is not e1.shop


# ------------------------------------------------------------------ goals and reset
def test_goals_are_phrased_and_reachable(env: WebShopEnv) -> None:
    for seed in range(200):
        env.reset(seed=seed)
        goal = env.goal
        assert goal.product_type in goal.instruction
        assert parse_price_upper(goal.instruction) == pytest.approx(goal.price_upper)
        target = env.product(goal.asin)
        assert score_purchase(target, best_options(target, goal), goal).success
        assert 1 <= len(goal.attributes) <= 3 and len(goal.options) <= 2


def test_same_seed_same_episode(env: WebShopEnv) -> None:
    first = env.reset(seed=11)
    assert env.reset(seed=11) == first
    instructions = {env.reset(seed=s)[1]["instruction"] for s in range(20)}
    assert len(instructions) >= 18


def test_reset_options_rejected(env: WebShopEnv) -> None:
    with pytest.raises(EnvConfigError) as e:
        env.reset(seed=0, options={"goal": 1})
    assert e.value.param == "options"


# ------------------------------------------------------------------ pages and actions
def test_browse_pages(env: WebShopEnv) -> None:
    obs, info = env.reset(seed=4)
    assert info["available_actions"] == {"has_search_bar": True, "clickables": []}
    obs, r, term, trunc, info = env.step(answer(f"search[{env.goal.product_type}]"))
    assert r == 0 and not term and info["page"] == "results" and info["action_is_effective"]
    clicks = info["available_actions"]["clickables"]
    assert clicks[:2] == ["back to search", "next >"] and len(clicks) == 12
    assert "click[next >]" in obs and "[Results]" in obs
    obs, *_, info = env.step(answer("click[Next >]"))
    assert "page 2 of" in obs and "< prev" in info["available_actions"]["clickables"]
    obs, *_, info = env.step(answer("click[< prev]"))
    assert "page 1 of" in obs
    asin = info["available_actions"]["clickables"][2]
    obs, *_, info = env.step(answer(f"click[{asin.upper()}]"))
    assert info["page"] == "item" and "buy now" in info["available_actions"]["clickables"]
    product = env.product(asin.upper())
    name, values = next(iter(product.options.items()))
    obs, *_, info = env.step(answer(f"click[{values[1]}]"))
    assert f"{name} = {values[1]}" in obs
    for section in ("description", "features", "reviews"):
        obs, *_, info = env.step(answer(f"click[{section}]"))
        assert info["page"] == "section" and f"[{section.capitalize()}]" in obs
        obs, *_, info = env.step(answer("click[< prev]"))
        assert info["page"] == "item" and f"{name} = {values[1]}" in obs  # selection kept
    obs, *_, info = env.step(answer("click[back to search]"))
    assert info["page"] == "search"
    json.dumps(info)


def test_unknown_words_give_empty_results(env: WebShopEnv) -> None:
    env.reset(seed=0)
    obs, *_, info = env.step(answer("search[zzqx qqzz]"))
    assert "No product matches" in obs and info["available_actions"]["clickables"] == ["back to search"]


@pytest.mark.parametrize(
    "text",
    ["no tags here", "<answer>dance[now]</answer>", "<answer>click[nothing like this]</answer>",
     "<answer>search[]</answer>", "<answer>click[buy now]</answer>"],
)  # fmt: skip
def test_invalid_actions_cost_format_penalty(text: str) -> None:
    env = WebShopEnv(format_penalty=-0.25)
    before, _ = env.reset(seed=2)
    obs, reward, term, trunc, info = env.step(text)
    assert reward == -0.25 and not term and not trunc
    assert info["action_is_valid"] is False and info["page"] == "search"
    assert "Invalid action:" in obs and obs.replace(obs.splitlines()[2] + "\n", "") == before


def test_search_only_on_search_page(env: WebShopEnv) -> None:
    env.reset(seed=1)
    env.step(answer("search[shampoo]"))
    obs, reward, *_, info = env.step(answer("search[conditioner]"))
    assert not info["action_is_valid"] and "only available on the search page" in obs


def test_candidates_are_all_valid(env: WebShopEnv) -> None:
    rng = np.random.default_rng(0)
    for seed in range(30):
        env.reset(seed=seed)
        for _ in range(8):
            cands = env.action_candidates()
            if not cands:
                break
            _, _, term, _, info = env.step(answer(cands[int(rng.integers(len(cands)))]))
            assert info["action_is_valid"]
            if term:
                assert env.action_candidates() == []
                break


# ------------------------------------------------------------------ reward
def _product(**kw) -> Product:
    base = dict(
        asin="B0TEST0001",
        title="Acme Sulfate Free Shampoo for Dry Hair",
        category="beauty",
        product_category="Beauty & Personal Care › Hair Care › Shampoo",
        product_type="shampoo",
        price=12.5,
        features=("PARABEN FREE: gentle.",),
        attributes=("sulfate free",),
        options={"size": ("8 fl oz", "16 fl oz"), "scent": ("rose", "citrus")},
    )
    return Product(**{**base, **kw})


GOAL = Goal(
    asin="B0TEST0001",
    instruction="i need sulfate free, paraben free and vegan shampoo with size: 16 fl oz, and price lower than 20.00 dollars",
    product_type="shampoo",
    product_category="Beauty & Personal Care › Hair Care › Shampoo",
    attributes=("sulfate free", "paraben free", "vegan"),
    options={"size": "16 fl oz"},
    price_upper=20.0,
)


def test_reward_formula() -> None:
    # 2 of 3 attributes (one from the features text), option chosen, price ok: (2 + 1 + 1) / 5
    score = score_purchase(_product(), {"size": "16 fl oz"}, GOAL)
    assert (score.r_type, score.attr_matches, score.option_matches, score.price_ok) == (1.0, 2, 1, True)
    assert score.reward == pytest.approx(4 / 5) and not score.success
    assert score_purchase(_product(), {}, GOAL).reward == pytest.approx(3 / 5)
    assert score_purchase(_product(price=25.0), {"size": "16 fl oz"}, GOAL).reward == pytest.approx(3 / 5)
    full = _product(attributes=("sulfate free", "paraben free", "vegan"))
    assert score_purchase(full, {"size": "16 fl oz"}, GOAL).success
    # a conditioner from the same aisle shares no word with "shampoo": r_type 0
    other = _product(title="Acme Conditioner", product_type="conditioner",
                     product_category="Beauty & Personal Care › Hair Care › Conditioner")  # fmt: skip
    assert score_purchase(other, {"size": "16 fl oz"}, GOAL).reward == 0.0
    # a product without options can state the option in its title
    plain = _product(options={}, title="Acme Shampoo 16 fl oz")
    assert score_purchase(plain, {}, GOAL).option_matches == 1


# ------------------------------------------------------------------ forking
def test_fork_continues_identically(env: WebShopEnv) -> None:
    oracle = WebShopOracle()
    env.reset(seed=21)
    env.step(answer("search[shoes]"))
    env.step(answer("click[next >]"))
    snap = json.loads(json.dumps(env.get_state()))
    twin = WebShopEnv()
    twin.set_state(snap)
    assert twin.render() == env.render() and twin.goal == env.goal
    for e in (env, twin):
        e.step(answer("click[back to search]"))
    oracle.reset()
    for _ in range(8):
        action = oracle.act(env)
        a, b = env.step(action), twin.step(action)
        assert a == b
        if a[2]:
            break
    assert a[2] and a[4]["success"]
    with pytest.raises(ResetNeeded):
        twin.step(answer("click[back to search]"))


def test_bad_snapshot_rejected(env: WebShopEnv) -> None:
    env.reset(seed=0)
    snap = env.get_state()
    snap["data"]["stack"] = [{"kind": "item", "asin": "NOPE", "options": {}}]
    with pytest.raises(StateError):
        env.set_state(snap)


# ------------------------------------------------------------------ policies
def test_oracle_solves_95_percent_of_500_seeds() -> None:
    env = envhub.make("WebShop-v0")
    results = [run_oracle(env, seed) for seed in range(500)]
    success = np.mean([info["success"] for _, info, _ in results])
    assert success >= 0.95
    assert max(steps for *_, steps in results) <= 15


def test_random_policy_scores_low() -> None:
    env = envhub.make("WebShop-v0")
    rng = np.random.default_rng(0)
    rewards, successes = [], []
    for seed in range(300):
        env.reset(seed=seed)
        done, reward, info = False, 0.0, {}
        while not done:
            cands = env.unwrapped.action_candidates()
            _, reward, term, trunc, info = env.step(answer(cands[int(rng.integers(len(cands)))]))
            done = term or trunc
        rewards.append(reward if term else 0.0)
        successes.append(info["success"])
    assert np.mean(successes) < 0.1 and np.mean(rewards) < 0.4


# ------------------------------------------------------------------ configuration
@pytest.mark.parametrize(
    ("kwargs", "param"),
    [({"num_products": 10}, "num_products"), ({"num_products": True}, "num_products"),
     ({"catalog_seed": -1}, "catalog_seed"), ({"catalog_path": "/no/such/file.json"}, "catalog_path"),
     ({"catalog_path": 3}, "catalog_path"), ({"goals_path": "/tmp/goals.json"}, "goals_path"),
     ({"format_penalty": float("nan")}, "format_penalty"), ({"colour": 1}, "colour")],
)  # fmt: skip
def test_bad_kwargs(kwargs: dict, param: str) -> None:
    with pytest.raises(EnvConfigError) as e:
        envhub.make("WebShop-v0", **kwargs)
    assert e.value.param == param


def test_bad_catalog_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(EnvConfigError, match="JSON") as e:
        WebShopEnv(catalog_path=broken)
    assert e.value.param == "catalog_path"
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps([{"asin": "X"}]))
    with pytest.raises(EnvConfigError, match="no usable product"):
        WebShopEnv(catalog_path=empty)


# ------------------------------------------------------------------ original file format
def _write_original_files(tmp_path: Path) -> tuple[Path, Path]:
    def option(*values):
        return [{"is_selected": i == 0, "url": None, "value": v, "image": None} for i, v in enumerate(values)]

    products = [
        {"asin": "B0ORIG0001", "name": "Hydrating Argan Oil Shampoo, Sulfate Free, 16 Fl Oz",
         "category": "beauty", "query": "shampoo", "product_category": "Beauty & Personal Care › Hair Care › Shampoo",
         "full_description": "A gentle shampoo with argan oil.", "pricing": "$12.99",
         "small_description": ["Sulfate free formula", "Safe for color treated hair"],
         "customization_options": {"Size": option("8 Fl Oz", "16 Fl Oz"), "Scent": option("Rose", "Mint")},
         "Reviews": [{"score": 5, "title": "Great", "body": "Love it."}], "average_rating": "4.5 out of 5 stars"},
        {"asin": "B0ORIG0002", "product_information": {"Title": "Men's Running Shoes Lightweight Mesh", "Color": "Blue"},
         "category": "fashion", "query": "running shoes",
         "product_category": "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
         "feature": "Breathable mesh upper", "pricing": ["$45.00", "$59.99"],
         "customization_options": {"color": ["black", "blue"], "size": ["9", "10", "11"]}},
        {"asin": "B0ORIG0003", "name": "Organic Green Tea Bags, 100 Count", "category": "grocery",
         "product_category": "Grocery & Gourmet Food › Beverages › Tea › Green", "pricing": "$8.49 - $15.99",
         "attributes": ["organic"]},
        {"asin": "B0ORIG0004", "name": "No price here", "category": "misc"},
    ]  # fmt: skip
    goals = {
        "B0ORIG0001": [{"asin": "B0ORIG0001", "attributes": ["sulfate free", "argan oil"],
                        "instruction": "i need a sulfate free shampoo in 16 fl oz size, and price lower than 20.00 dollars",
                        "instruction_attributes": ["sulfate free"], "instruction_options": ["16 fl oz"]}],
        "B0ORIG0002": {"attributes": ["lightweight"], "instruction_attributes": ["lightweight"],
                       "instruction_options": {"color": "blue", "size": "10"}},
        "B0ORIG0003": {"attributes": ["organic"]},
    }  # fmt: skip
    catalog_path, goals_path = tmp_path / "items_shuffle.json", tmp_path / "items_ins.json"
    catalog_path.write_text(json.dumps(products))
    goals_path.write_text(json.dumps(goals))
    return catalog_path, goals_path


def test_loader_reads_original_format(tmp_path: Path) -> None:
    catalog_path, goals_path = _write_original_files(tmp_path)
    catalog = load_catalog_file(catalog_path, goals_path)
    assert [p.asin for p in catalog.products] == ["B0ORIG0001", "B0ORIG0002", "B0ORIG0003"]  # no price: skipped
    shampoo, shoes, tea = catalog.products
    assert shampoo.price == 12.99 and shampoo.options == {"size": ("8 fl oz", "16 fl oz"), "scent": ("rose", "mint")}
    assert shampoo.rating == 4.5 and shampoo.reviews[0].rating == 5 and "argan oil" in shampoo.attributes
    assert shoes.title == "Men's Running Shoes Lightweight Mesh" and shoes.price == 45.0
    assert "Color: Blue" in shoes.description and shoes.features == ("Breathable mesh upper",)
    assert tea.price == 8.49 and tea.product_type == "green" and tea.attributes == ("organic",)
    assert len(catalog.goals) == 2
    g1, g2 = catalog.goals
    assert g1.price_upper == 20.0 and g1.options == {"size": "16 fl oz"}
    assert g2.options == {"color": "blue", "size": "10"} and "price lower than" in g2.instruction


def test_env_on_original_files(tmp_path: Path) -> None:
    catalog_path, goals_path = _write_original_files(tmp_path)
    env = envhub.make("WebShop-v0", catalog_path=str(catalog_path), goals_path=str(goals_path))
    wins = [run_oracle(env, seed)[1]["success"] for seed in range(10)]
    assert all(wins)
    env = WebShopEnv(catalog_path=catalog_path)  # goals sampled from the products
    env.reset(seed=0)
    assert env.goal.asin in env.shop.catalog.by_asin and "price lower than" in env.goal.instruction
    assert open_shop(1000, 0, str(catalog_path)) is env.shop


# ------------------------------------------------------------------ results per page and the score's parts
def test_results_per_page_shortens_result_pages() -> None:
    default, short = WebShopEnv(num_products=100), WebShopEnv(num_products=100, results_per_page=3)
    query = answer("search[shampoo]")
    for e in (default, short):
        e.reset(seed=4)
        e.step(query)
    assert "size" not in default.page  # the default's pages (and snapshots) are as before
    page = short.page
    assert page["size"] == 3 and len(page["asins"]) == len(default.page["asins"])
    shown = page["asins"][:3]
    clicks = short.action_candidates()
    assert [c for c in clicks if c[6:-1] in {a.lower() for a in page["asins"]}] == [
        f"click[{a.lower()}]" for a in shown
    ]
    if len(page["asins"]) > 3:
        obs, *_ = short.step(answer("click[next >]"))
        assert f"products 4-{min(6, len(page['asins']))} of {len(page['asins'])}" in obs
    fork = WebShopEnv(num_products=100, results_per_page=3)
    fork.set_state(short.get_state())
    assert fork.page == short.page
    for bad in (0, 51, 2.5, True, "3"):
        with pytest.raises(EnvConfigError) as e:
            WebShopEnv(num_products=100, results_per_page=bad)
        assert e.value.param == "results_per_page"


def test_oracle_with_short_result_pages() -> None:
    env = envhub.make("WebShop-v0", num_products=100, results_per_page=3)
    rewards = [run_oracle(env, seed)[0] for seed in range(30)]
    assert sum(r == 1.0 for r in rewards) >= 28


def test_final_info_carries_the_score_parts(env: WebShopEnv) -> None:
    reward, info, _ = run_oracle(env, 7)
    parts = info["reward_details"]
    product, goal = env.product(info["purchased"]), env.goal
    assert parts == score_purchase(product, env.page["options"], goal).to_dict()
    assert parts["reward"] == reward and parts["r_type"] == 1.0 and parts["price_ok"] is True
    assert parts["attr_matches"] == parts["n_attrs"] and parts["option_matches"] == parts["n_options"]
    env.reset(seed=7)
    _, _, _, _, info = env.step(answer(f"search[{env.goal.product_type}]"))
    assert "reward_details" not in info


def test_results_labelled_by_position() -> None:
    env = WebShopEnv(num_products=100, results_per_page=3, result_labels="position")
    plain = WebShopEnv(num_products=100, results_per_page=3)
    for e in (plain, env):
        e.reset(seed=4)
        obs, *_ = e.step(answer("search[shampoo]"))
    assert env.page["labels"] == "position" and "labels" not in plain.page
    shown = env.page["asins"][:3]
    assert env.action_candidates()[-len(shown) :] == [f"click[result {i + 1}]" for i in range(len(shown))]
    assert "[result 1]" in obs and f"[{shown[0].lower()}]" not in obs
    _, _, _, _, info = env.step(answer(f"click[{shown[0].lower()}]"))
    assert not info["action_is_valid"]
    _, _, _, _, info = env.step(answer("click[result 2]"))
    assert info["page"] == "item" and env.page["asin"] == shown[1]
    rewards = [
        run_oracle(envhub.make("WebShop-v0", num_products=100, result_labels="position"), s)[0] for s in range(20)
    ]
    assert sum(r == 1.0 for r in rewards) >= 19
    with pytest.raises(EnvConfigError) as e:
        WebShopEnv(num_products=100, result_labels="index")
    assert e.value.param == "result_labels"
