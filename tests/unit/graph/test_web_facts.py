"""JavaScript, TypeScript, TSX and Go code-graph facts (cluster/graph/web_spec.py): definitions
qualified by their classes or receivers, calls with their receivers, mentions, and every import form."""

from __future__ import annotations

from cluster.graph import file_facts
from cluster.types import ImportBinding
from tests.support.graph_facts import calls_of, definitions_of, mentions_of

JS = """\
import { formatMoney as money, round } from "./format";
import Cart from "../models/cart.js";
import * as api from "api-client";
const config = require("./config");
const { send, retry: again } = require("../net/send");

class Checkout extends Base {
  constructor(cart) {
    super(cart);
    this.cart = cart || new Cart();
  }
  async submit() {
    const total = round(this.cart.total());
    await api.post("/orders", { total, label: money(total) });
    return super.finish(total);
  }
  onError = (err) => again(send, err);
}

const validate = (cart) => cart.items.length > 0 && check(cart);
let summarise = function (cart) { return new api.Summary(cart); };
function register(app) { app.use(validate); return Checkout; }
"""

TS = """\
import type { Order, Line } from "./orders";
import fs = require("fs");
import defaultStore from "./store";

export interface Repository<T> extends Reader<T>, db.Closeable {
  save(item: T): Promise<void>;
}

export type OrderId = string | Brand;

export enum Status { Open, Closed }

export abstract class OrderRepo extends BaseRepo<Order> implements Repository<Order> {
  private cache: Map<OrderId, Order> = new Map();
  constructor(private readonly path: string) { super(path); }
  abstract flush(): void;
  async save(order: Order): Promise<void> {
    this.cache.set(order.id, order as Order);
    fs.writeFileSync(this.path, serialise(order));
  }
}

export namespace Orders {
  export function open(lines: Line[]): Order { return defaultStore.create(lines); }
}
"""

TSX = """\
import { Button } from "./ui";
import * as icons from "./icons";

export const Toolbar = ({ onSave }: Props) => (
  <Panel title="Tools">
    <Button onClick={onSave}><icons.Save /></Button>
    <div className="spacer" />
  </Panel>
);
"""

GO = """\
package store

import (
\t"context"
\tf "fmt"
\t_ "embed"
\t. "strings"
\t"github.com/acme/shop/internal/db"
\t"gopkg.in/yaml.v3"
\t"github.com/acme/shop/v2"
)

type Repo struct {
\tdb.Conn
\t*Base
\tname string
}

type Saver interface {
\tio.Closer
\tSave(ctx context.Context, r *Repo) error
}

type ID = string

type Handler func(ctx context.Context) error

var Default = func() *Repo { return NewRepo("default") }

func NewRepo(name string) *Repo {
\treturn &Repo{name: name}
}

func (r *Repo) Save(ctx context.Context) error {
\tf.Println(r.name)
\tr.flush(ctx)
\treturn write(ctx, db.Open)
}

func (g Gen[T]) Get() T { return g.v }
"""


# --- JavaScript ------------------------------------------------------------------------------------


def test_javascript_classes_methods_and_functions_assigned_to_variables_are_definitions() -> None:
    facts = file_facts("web/shop/checkout.js", "javascript", JS)
    assert definitions_of(facts) == [
        ("Checkout", "class", 7, 18, ("Base",)),
        ("Checkout.constructor", "method", 8, 11, ()),
        ("Checkout.submit", "method", 12, 16, ()),
        ("Checkout.onError", "method", 17, 17, ()),
        ("validate", "function", 20, 20, ()),
        ("summarise", "function", 21, 21, ()),
        ("register", "function", 22, 22, ()),
    ]


def test_javascript_calls_keep_their_receivers_and_new_is_a_call_of_the_class() -> None:
    facts = file_facts("web/shop/checkout.js", "javascript", JS)
    assert calls_of(facts) == [
        ("Cart", 10, None, "Checkout.constructor"),
        ("round", 13, None, "Checkout.submit"),
        ("total", 13, "this.cart", "Checkout.submit"),
        ("post", 14, "api", "Checkout.submit"),
        ("money", 14, None, "Checkout.submit"),
        ("finish", 15, "super", "Checkout.submit"),
        ("again", 17, None, "Checkout.onError"),
        ("check", 20, None, "validate"),
        ("Summary", 21, "api", "summarise"),
        ("use", 22, "app", "register"),
    ]
    assert not any(r.name == "require" for r in facts.references)  # an import, not a call of the code base
    assert {("Base", 7, None), ("send", 17, None), ("validate", 22, None), ("Checkout", 22, None)} <= mentions_of(facts)
    assert ("cart", 10, "this") in mentions_of(facts)


def test_javascript_es_imports_and_require_bind_their_aliases() -> None:
    facts = file_facts("web/shop/checkout.js", "javascript", JS)
    assert list(facts.imports) == [
        ImportBinding(alias="round", target="web.shop.format.round", line=1),
        ImportBinding(alias="money", target="web.shop.format.formatMoney", line=1),
        ImportBinding(alias="Cart", target="web.models.cart", line=2),
        ImportBinding(alias="api", target="api-client", line=3),
        ImportBinding(alias="config", target="web.shop.config", line=4),
        ImportBinding(alias="send", target="web.net.send.send", line=5),
        ImportBinding(alias="again", target="web.net.send.retry", line=5),
    ]


def test_a_call_of_something_other_than_require_binds_nothing() -> None:
    facts = file_facts("a.js", "javascript", 'const x = load("./m");\nconst y = require(name);\n')
    assert facts.imports == ()
    assert [(r.name, r.line) for r in facts.references if r.call] == [("load", 1)]


# --- TypeScript and TSX ----------------------------------------------------------------------------


def test_typescript_interfaces_type_aliases_enums_namespaces_and_bases() -> None:
    facts = file_facts("src/repo/orders.ts", "typescript", TS)
    assert definitions_of(facts) == [
        ("Repository", "interface", 5, 7, ("Reader", "Closeable")),
        ("Repository.save", "method", 6, 6, ()),
        ("OrderId", "type", 9, 9, ()),
        ("Status", "enum", 11, 11, ()),
        ("OrderRepo", "class", 13, 21, ("BaseRepo", "Repository")),
        ("OrderRepo.constructor", "method", 15, 15, ()),
        ("OrderRepo.flush", "method", 16, 16, ()),
        ("OrderRepo.save", "method", 17, 20, ()),
        ("Orders", "module", 23, 25, ()),
        ("Orders.open", "method", 24, 24, ()),
    ]


def test_typescript_calls_and_the_type_names_signatures_mention() -> None:
    facts = file_facts("src/repo/orders.ts", "typescript", TS)
    assert calls_of(facts) == [
        ("Map", 14, None, "OrderRepo"),
        ("set", 18, "this.cache", "OrderRepo.save"),
        ("writeFileSync", 19, "fs", "OrderRepo.save"),
        ("serialise", 19, None, "OrderRepo.save"),
        ("create", 24, "defaultStore", "Orders.open"),
    ]
    assert {
        ("Closeable", 5, "db"),
        ("Brand", 9, None),
        ("OrderId", 14, None),
        ("Order", 17, None),
        ("Promise", 17, None),
        ("Order", 18, None),
        ("Line", 24, None),
    } <= mentions_of(facts)
    assert ("Closeable", 5, None) not in mentions_of(facts)  # a qualified type is mentioned once, with its module


def test_typescript_imports_including_type_only_and_import_require() -> None:
    facts = file_facts("src/repo/orders.ts", "typescript", TS)
    assert list(facts.imports) == [
        ImportBinding(alias="Order", target="src.repo.orders.Order", line=1),
        ImportBinding(alias="Line", target="src.repo.orders.Line", line=1),
        ImportBinding(alias="fs", target="fs", line=2),
        ImportBinding(alias="defaultStore", target="src.repo.store", line=3),
    ]


def test_tsx_components_an_element_names_are_mentions_and_html_tags_are_not() -> None:
    facts = file_facts("src/ui/toolbar.tsx", "tsx", TSX)
    assert definitions_of(facts) == [("Toolbar", "function", 4, 9, ())]
    assert mentions_of(facts) == {
        ("Props", 4, None),
        ("Panel", 5, None),
        ("Button", 6, None),
        ("onSave", 6, None),
        ("Save", 6, "icons"),
    }
    assert list(facts.imports) == [
        ImportBinding(alias="Button", target="src.ui.ui.Button", line=1),
        ImportBinding(alias="icons", target="src.ui.icons", line=2),
    ]


def test_jsx_in_a_javascript_file_is_read_too() -> None:
    facts = file_facts("app.jsx", "javascript", "function App() { return <Layout><span/></Layout>; }\n")
    assert [d.qualified for d in facts.definitions] == ["App"]
    assert mentions_of(facts) == {("Layout", 1, None)}


# --- Go --------------------------------------------------------------------------------------------


def test_go_methods_are_qualified_by_their_receiver_and_structs_name_what_they_embed() -> None:
    facts = file_facts("internal/store/repo.go", "go", GO)
    assert definitions_of(facts) == [
        ("Repo", "struct", 13, 17, ("Conn", "Base")),
        ("Saver", "interface", 19, 22, ("Closer",)),
        ("Saver.Save", "method", 21, 21, ()),
        ("ID", "type", 24, 24, ()),
        ("Handler", "type", 26, 26, ()),
        ("Default", "function", 28, 28, ()),
        ("NewRepo", "function", 30, 32, ()),
        ("Repo.Save", "method", 34, 38, ()),
        ("Gen.Get", "method", 40, 40, ()),
    ]


def test_go_calls_through_packages_and_values_and_mentions_of_types() -> None:
    facts = file_facts("internal/store/repo.go", "go", GO)
    assert calls_of(facts) == [
        ("NewRepo", 28, None, "Default"),
        ("Println", 35, "f", "Repo.Save"),
        ("flush", 36, "r", "Repo.Save"),
        ("write", 37, None, "Repo.Save"),
    ]
    mentions = mentions_of(facts)
    assert {("Conn", 14, "db"), ("Context", 21, "context"), ("Repo", 21, None), ("Repo", 31, None)} <= mentions
    assert {("Open", 37, "db"), ("ctx", 37, None)} <= mentions
    assert not any(r.name in {"string", "error", "nil"} for r in facts.references)  # predeclared, never the code's


def test_go_imports_bind_the_package_name_or_the_alias_and_blank_imports_bind_nothing() -> None:
    facts = file_facts("internal/store/repo.go", "go", GO)
    assert list(facts.imports) == [
        ImportBinding(alias="context", target="context", line=4),
        ImportBinding(alias="f", target="fmt", line=5),
        ImportBinding(alias="*", target="strings", line=7),
        ImportBinding(alias="db", target="github.com.acme.shop.internal.db", line=8),
        ImportBinding(alias="yaml", target="gopkg.in.yaml.v3", line=9),
        ImportBinding(alias="shop", target="github.com.acme.shop.v2", line=10),
    ]


def test_a_single_go_import_outside_a_group_is_read() -> None:
    facts = file_facts(
        "cmd/main.go", "go", 'package main\n\nimport "net/http"\n\nfunc main() { http.ListenAndServe() }\n'
    )
    assert list(facts.imports) == [ImportBinding(alias="http", target="net.http", line=3)]
    assert calls_of(facts) == [("ListenAndServe", 5, "http", "main")]


# --- fixtures ----------------------------------------------------------------------------------------

_LANGUAGES = {".js": "javascript", ".ts": "typescript", ".tsx": "tsx", ".go": "go"}
