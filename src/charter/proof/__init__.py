"""Proof: context tests, the inherited regression corpus and promotion, effect-free replay."""
