"""Carriers: where a conversation's ledger lives between rounds, behind one contract.

The replay core runs a handler against a ledger; a carrier restores that ledger for a
request, runs the core and keeps what it returns. :mod:`~mrtr.carriers.contract` holds
the contract the server calls (one outcome type for every carrier, and the one helper
deciding where handler code runs); :mod:`~mrtr.carriers.sealed` keeps the ledger in the
sealed ``requestState`` token the client echoes (stateless: any worker serves any
round); :mod:`~mrtr.carriers.tasks` keeps it in a task record in a store (memory,
SQLite, Redis), so a call can outlive its request; :mod:`~mrtr.carriers.live` needs
none: in a 2025-era session the generator waits at its ``yield`` while the question goes
to the client.
"""
