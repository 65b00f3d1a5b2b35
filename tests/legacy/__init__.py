"""Tests of the legacy era: the live driver and carrier, sessions, and 2025-era clients over stdio."""
