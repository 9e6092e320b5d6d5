"""End-to-end runs of each library's own trainer on CPU (see harness/)."""
