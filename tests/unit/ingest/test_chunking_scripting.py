"""Syntax-aware chunking of PHP, Ruby and Lua (cluster/ingest/syntax_rules_scripting.py): functions,
methods, classes, interfaces, traits, enums and modules get their symbols and kinds, and a big
class or module is split into its methods."""

from __future__ import annotations

from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings
from tests.support.chunk_checks import SETTINGS, assert_exact_text, spans

SMALL = ChunkingSettings(window_lines=6, overlap_lines=1)

PHP_SOURCE = r"""<?php
namespace App\Billing;

use App\Models\Order;

interface Payable {
    public function pay(): void;
}

trait Logs {
    public function log($m) { error_log($m); }
}

enum Status: string {
    case Paid = 'paid';
}

// Bills one order.
class Invoice extends Document implements Payable {
    use Logs;

    public function __construct(private Order $order) {}

    /** Pays it. */
    public function pay(): void {
        $this->log('paid');
    }
}

function compute_total(array $items): float {
    return array_sum($items);
}
"""


def test_php_definitions_get_their_kinds_and_symbols() -> None:
    chunks = chunk_file("src/Billing/Invoice.php", PHP_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 4, "module", None),
        (6, 8, "interface", "Payable"),
        (10, 12, "trait", "Logs"),
        (14, 16, "enum", "Status"),
        (18, 28, "class", "Invoice"),
        (30, 32, "function", "compute_total"),
    ]
    assert {c.language for c in chunks} == {"php"}
    assert_exact_text(chunks, PHP_SOURCE)


def test_a_big_php_class_is_split_into_methods_with_their_doc_comments() -> None:
    chunks = chunk_file("src/Billing/Invoice.php", PHP_SOURCE, SMALL)
    assert [s for s in spans(chunks) if s[3] and s[3].startswith("Invoice")] == [
        (18, 20, "class", "Invoice"),  # its comment, head and trait use (a lone `}` is no chunk)
        (22, 22, "method", "Invoice.__construct"),
        (24, 27, "method", "Invoice.pay"),
    ]
    assert_exact_text(chunks, PHP_SOURCE)


def test_php_definitions_inside_a_braced_namespace_are_top_level_chunks() -> None:
    source = "<?php\nnamespace A {\n  class X {\n    function f() {}\n  }\n  function g() {}\n}\n"
    assert spans(chunk_file("a.php", source, SETTINGS)) == [
        (1, 2, "module", None),
        (3, 5, "class", "X"),
        (6, 6, "function", "g"),
    ]


RUBY_SOURCE = """\
require 'json'

module Billing
  # An order's bill.
  class Invoice < Base
    def initialize(items)
      @items = items
    end

    def self.build(items) = new(items)

    def total
      @items.sum(&:price)
    end
  end
end

def compute_total(items)
  Billing::Invoice.new(items).total
end
"""


def test_ruby_modules_classes_and_methods_get_their_kinds_and_symbols() -> None:
    chunks = chunk_file("lib/billing.rb", RUBY_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 1, "module", None),
        (3, 16, "module", "Billing"),
        (18, 20, "function", "compute_total"),
    ]
    assert {c.language for c in chunks} == {"ruby"}
    assert_exact_text(chunks, RUBY_SOURCE)


def test_a_big_ruby_module_is_split_into_its_class_and_the_class_into_methods() -> None:
    chunks = chunk_file("lib/billing.rb", RUBY_SOURCE, SMALL)
    assert spans(chunks) == [
        (1, 1, "module", None),
        (3, 3, "module", "Billing"),
        (4, 5, "class", "Billing.Invoice"),
        (6, 8, "method", "Billing.Invoice.initialize"),
        (10, 10, "method", "Billing.Invoice.build"),
        (12, 14, "method", "Billing.Invoice.total"),
        (15, 15, "class", "Billing.Invoice"),
        (16, 16, "module", "Billing"),
        (18, 20, "function", "compute_total"),
    ]
    assert_exact_text(chunks, RUBY_SOURCE)


LUA_SOURCE = """\
local util = require("lib.util")
local Account = {}

-- A new account.
function Account.new(balance)
  return setmetatable({ balance = balance }, Account)
end

function Account:deposit(v)
  self.balance = util.add(self.balance, v)
end

local function audit(account)
  print(account.balance)
end

return Account
"""


def test_lua_functions_in_every_form_get_their_symbols() -> None:
    chunks = chunk_file("lib/account.lua", LUA_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 2, "module", None),
        (4, 7, "function", "Account.new"),
        (9, 11, "function", "Account:deposit"),
        (13, 15, "function", "audit"),
        (17, 17, "module", None),
    ]
    assert {c.language for c in chunks} == {"lua"}
    assert_exact_text(chunks, LUA_SOURCE)
