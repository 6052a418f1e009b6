"""The code-graph facts of PHP, Ruby, Lua and Bash (cluster/graph/scripting_spec.py): definitions with
their containers and bases, calls with their receivers, mentions, imports (with the readers that make
relative paths absolute from the file's folder), and the two-file fixtures under
tests/fixtures/polyglot_graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.graph import file_facts
from cluster.graph.extract import _query
from cluster.graph.registry import SPECS as REGISTERED
from cluster.graph.scripting_spec import SPECS
from cluster.graph.spec import GraphSpec
from cluster.types import ImportBinding
from tests.support.graph_facts import calls_of, definitions_of, mentions_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "polyglot_graph"


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.language)
def test_every_query_compiles_against_its_installed_grammar_and_is_registered(spec: GraphSpec) -> None:
    assert _query(spec) is not None
    assert REGISTERED[spec.language] is spec


PHP_SOURCE = r"""<?php
namespace App\Billing;

use App\Models\Order;
use App\Util\Math as M;
use App\{Money, Tax as T};
require_once __DIR__ . '/lib/rates.php';

interface Payable extends Countable { public function pay(): void; }

trait Logs { public function log($m) { error_log($m); } }

class Invoice extends Document implements Payable, \JsonSerializable {
    use Logs;
    public function __construct(private Order $order) { parent::__construct(); }
    public static function make(): static { return new static(new Order()); }
    public function total(Money $m): float {
        $this->log(Order::class);
        $sum = self::make()->items?->sum();
        return M\round(T::apply($sum), helper($m));
    }
}

enum Status: string implements HasLabel { case Paid = 'paid'; }

function compute_total(array $items): float { return (new Invoice(new \App\Models\Order()))->total($items); }
"""


def test_php_definitions_are_qualified_by_their_class_and_keep_extends_implements_and_traits() -> None:
    facts = file_facts("app/billing/Invoice.php", "php", PHP_SOURCE)
    assert definitions_of(facts) == [
        ("Payable", "interface", 9, 9, ("Countable",)),
        ("Payable.pay", "method", 9, 9, ()),
        ("Logs", "trait", 11, 11, ()),
        ("Logs.log", "method", 11, 11, ()),
        ("Invoice", "class", 13, 22, ("Document", "Payable", "JsonSerializable", "Logs")),
        ("Invoice.__construct", "method", 15, 15, ()),
        ("Invoice.make", "method", 16, 16, ()),
        ("Invoice.total", "method", 17, 21, ()),
        ("Status", "enum", 24, 24, ("HasLabel",)),
        ("compute_total", "function", 26, 26, ()),
    ]


def test_php_calls_read_this_parent_self_scoped_namespaced_and_new_calls() -> None:
    facts = file_facts("app/billing/Invoice.php", "php", PHP_SOURCE)
    assert calls_of(facts) == [
        ("error_log", 11, None, "Logs.log"),
        ("__construct", 15, "parent", "Invoice.__construct"),
        ("Order", 16, None, "Invoice.make"),  # `new static(...)` is no call of a name
        ("log", 18, "$this", "Invoice.total"),
        ("make", 19, "self", "Invoice.total"),
        ("sum", 19, "self.make().items", "Invoice.total"),
        ("round", 20, "M", "Invoice.total"),
        ("apply", 20, "T", "Invoice.total"),
        ("helper", 20, None, "Invoice.total"),
        ("Invoice", 26, None, "compute_total"),
        ("Order", 26, "App.Models", "compute_total"),
        ("total", 26, "?", "compute_total"),
    ]
    assert {("Countable", 9, None), ("Document", 13, None), ("Logs", 14, None), ("Order", 15, None)} <= mentions_of(
        facts
    )
    assert {("Money", 17, None), ("Order", 18, None), ("items", 19, "self.make()")} <= mentions_of(facts)


def test_php_use_clauses_groups_and_includes_bind_their_aliases() -> None:
    facts = file_facts("app/billing/Invoice.php", "php", PHP_SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="Order", target="App.Models.Order", line=4),
        ImportBinding(alias="M", target="App.Util.Math", line=5),
        ImportBinding(alias="Money", target="App.Money", line=6),
        ImportBinding(alias="T", target="App.Tax", line=6),
        ImportBinding(alias="*", target="app.billing.lib.rates", line=7),
    ]


def test_php_includes_of_a_plain_path_resolve_from_the_folder_and_dynamic_ones_are_skipped() -> None:
    source = "<?php\ninclude 'util.php';\nrequire($dir . '/x.php');\nuse function Lib\\helper;\n"
    assert list(file_facts("web/index.php", "php", source).imports) == [
        ImportBinding(alias="*", target="web.util", line=2),
        ImportBinding(alias="helper", target="Lib.helper", line=4),
    ]


RUBY_SOURCE = """\
require 'json'
require_relative '../support/tax'
autoload :Rates, 'billing/rates'

module Billing
  class Invoice < Base::Record
    include Comparable

    def initialize(items)
      super(items)
      @items = items
    end

    def self.build(items) = new(items)

    def total
      sum = @items.sum(&:price)
      self.log(sum)
      audit sum
      Tax::Calc.apply(sum, rate: RATE)
      refresh
    end
  end
end

def compute_total(items)
  invoice = Billing::Invoice.new(items)
  JSON.generate(Invoice.build(items).total)
end
"""


def test_ruby_modules_classes_mixins_and_class_methods_are_definitions() -> None:
    facts = file_facts("app/billing/invoice.rb", "ruby", RUBY_SOURCE)
    assert definitions_of(facts) == [
        ("Billing", "module", 5, 24, ()),
        ("Billing.Invoice", "class", 6, 23, ("Record", "Comparable")),
        ("Billing.Invoice.initialize", "method", 9, 12, ()),
        ("Billing.Invoice.build", "method", 14, 14, ()),
        ("Billing.Invoice.total", "method", 16, 22, ()),
        ("compute_total", "function", 26, 29, ()),
    ]


def test_ruby_calls_with_and_without_parentheses_and_foo_new_as_a_call_of_foo() -> None:
    facts = file_facts("app/billing/invoice.rb", "ruby", RUBY_SOURCE)
    assert calls_of(facts) == [
        ("sum", 17, "@items", "Billing.Invoice.total"),
        ("log", 18, "self", "Billing.Invoice.total"),
        ("audit", 19, None, "Billing.Invoice.total"),
        ("apply", 20, "Tax.Calc", "Billing.Invoice.total"),
        ("refresh", 21, None, "Billing.Invoice.total"),  # a bare word statement is a call of a method
        ("Invoice", 27, "Billing", "compute_total"),
        ("generate", 28, "JSON", "compute_total"),
        ("build", 28, "Invoice", "compute_total"),
        ("total", 28, "?", "compute_total"),
    ]
    assert {("Base", 6, None), ("Record", 6, "Base"), ("Comparable", 7, None), ("price", 17, None)} <= mentions_of(
        facts
    )
    assert {("Calc", 20, "Tax"), ("RATE", 20, None), ("JSON", 28, None)} <= mentions_of(facts)
    assert not any(r.name in {"require", "require_relative", "include", "new"} for r in facts.references)


def test_ruby_requires_are_wildcards_and_require_relative_resolves_from_the_folder() -> None:
    facts = file_facts("app/billing/invoice.rb", "ruby", RUBY_SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="*", target="json", line=1),
        ImportBinding(alias="*", target="app.support.tax", line=2),
        ImportBinding(alias="Rates", target="billing.rates", line=3),
    ]


LUA_SOURCE = """\
local util = require("lib.util")
local fmt = require("lib.fmt").format
require "globals"

local Account = {}
Account.__index = Account

function Account.new(balance)
  return setmetatable({ balance = balance }, Account)
end

function Account:deposit(v)
  self.balance = util.add(self.balance, v)
  self:notify(fmt(v))
end

local function audit(account)
  print(account.balance)
end

Account.close = function(self) audit(self) end

function compute_total(items)
  local a = Account.new(0)
  a:deposit(items)
  return callback(audit)
end
"""


def test_lua_functions_on_a_table_are_members_of_it_whatever_their_form() -> None:
    facts = file_facts("app/account.lua", "lua", LUA_SOURCE)
    assert definitions_of(facts) == [
        ("Account.new", "method", 8, 10, ()),
        ("Account.deposit", "method", 12, 15, ()),
        ("audit", "function", 17, 19, ()),
        ("Account.close", "method", 21, 21, ()),
        ("compute_total", "function", 23, 27, ()),
    ]


def test_lua_calls_through_dots_and_colons_keep_their_table_as_qualifier() -> None:
    facts = file_facts("app/account.lua", "lua", LUA_SOURCE)
    assert calls_of(facts) == [
        ("setmetatable", 9, None, "Account.new"),
        ("add", 13, "util", "Account.deposit"),
        ("notify", 14, "self", "Account.deposit"),
        ("fmt", 14, None, "Account.deposit"),
        ("print", 18, None, "audit"),
        ("audit", 21, None, "Account.close"),
        ("new", 24, "Account", "compute_total"),
        ("deposit", 25, "a", "compute_total"),
        ("callback", 26, None, "compute_total"),
    ]
    assert {("Account", 9, None), ("balance", 13, "self"), ("balance", 18, "account"), ("audit", 26, None)} <= (
        mentions_of(facts)
    )
    assert not any(r.name == "require" for r in facts.references)


def test_lua_requires_bind_the_local_they_are_assigned_to_or_a_wildcard() -> None:
    facts = file_facts("app/account.lua", "lua", LUA_SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="util", target="lib.util", line=1),
        ImportBinding(alias="fmt", target="lib.fmt.format", line=2),
        ImportBinding(alias="*", target="globals", line=3),
    ]


BASH_SOURCE = """\
#!/usr/bin/env bash
set -euo pipefail
source ./lib/common.sh
. "$(dirname "$0")/util.sh"
source "$RUNTIME_PLUGIN"

log() {
  echo "$@" >&2
}

function build {
  log "building $1"
  local out
  out=$(compute_total "$1" | tee build.log)
  trap cleanup EXIT
}

main() { build src && log done; }

main "$@"
"""


def test_bash_functions_and_the_commands_that_may_call_them() -> None:
    facts = file_facts("ci/build.sh", "bash", BASH_SOURCE)
    assert definitions_of(facts) == [
        ("log", "function", 7, 9, ()),
        ("build", "function", 11, 16, ()),
        ("main", "function", 18, 18, ()),
    ]
    assert calls_of(facts) == [
        ("dirname", 4, None, None),
        ("log", 12, None, "build"),
        ("compute_total", 14, None, "build"),
        ("tee", 14, None, "build"),
        ("build", 18, None, "main"),
        ("log", 18, None, "main"),
        ("main", 20, None, None),
    ]
    assert mentions_of(facts) == {("cleanup", 15, None)}  # a trap handler names a function


def test_bash_sources_resolve_from_the_folder_and_an_unknown_path_is_skipped() -> None:
    facts = file_facts("ci/build.sh", "bash", BASH_SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="*", target="ci.lib.common", line=3),
        ImportBinding(alias="*", target="ci.util", line=4),
    ]


def test_the_fixtures_import_the_defining_file_the_idiomatic_way() -> None:
    targets = {
        language: [b.target for b in file_facts(path, language, (FIXTURES / path).read_text(encoding="utf-8")).imports]
        for language, path in [
            ("php", "php/report.php"),
            ("ruby", "ruby/report.rb"),
            ("lua", "lua/report.lua"),
            ("bash", "bash/report.sh"),
        ]
    }
    assert targets == {
        "php": ["php.billing"],
        "ruby": ["ruby.billing"],
        "lua": ["lua.billing"],
        "bash": ["bash.billing"],
    }
