"""Example handlers shipped with mrtr."""
