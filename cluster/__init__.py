"""samespace's domain: plain Python, testable without Ray. One subpackage per concern (docs/ARCHITECTURE.md)."""
