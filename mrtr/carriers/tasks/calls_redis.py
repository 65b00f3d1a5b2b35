"""Recorded 2025 calls in Redis: every node adopts the calls of a node that stopped.

Per call (keys of :class:`~mrtr.carriers.tasks.redis_url.KeyLayout`, all under the
sessions' hash tag, so in a Redis Cluster every script stays in one slot):

- ``call:<session>:<stream>``, a hash: ``version``, ``request`` and ``meta`` (the client's
  request, whose call), ``state`` (ledger and round), ``qs`` (the questions it waits
  on), ``last`` and ``bytes`` (its kept events), ``done``;
- ``callev:<session>:<stream>``, a list of its kept events (``<position>\\n<data>``);
- ``calls:<session>``, a hash per session: ``s:<stream>`` each call recorded,
  ``h:<stream>`` its holder while it runs, ``q:<question>`` the stream waiting on that
  question, ``a:<question>`` an answer that arrived, ``r:<request>`` the stream of a
  request;
- ``nodelease:<node>``, each node's lease (a key with a TTL), and ``nodeslots``.

Every operation that reads and writes is one Lua script, so a holder's
compare-and-set, an adopter's claim and an answer's record are atomic, and a claim sees
whether the holder's lease is alive in the same step.
"""

from __future__ import annotations

from typing import Any

from ...core.calls import AnswerRoute, Stored
from .calls import FINISHED_TTL, KEPT_EVENTS, MAX_EVENT_BYTES, Claim, Created
from .redis_scripts import RedisScripts, milliseconds

__all__ = ["RedisCalls"]

# KEYS: call, events, index. ARGV: node, version, created ('1'/'0'), request, meta, state ('' keeps it),
# pending ('-' keeps it, else the question names joined by newlines), stream, done ('1'/'0'), ttl ms,
# finished ttl ms, max bytes, max events, then the events as position, data pairs.
_WRITE = """
local call, events, index = KEYS[1], KEYS[2], KEYS[3]
local node, stream = ARGV[1], ARGV[8]
local current
if ARGV[3] == '1' then
  if redis.call('EXISTS', call) == 1 then return 0 end
  redis.call('HSET', call, 'version', 1, 'request', ARGV[4], 'meta', ARGV[5], 'last', 0, 'bytes', 0, 'qs', '')
  redis.call('HSET', index, 'h:' .. stream, node, 'r:' .. ARGV[4], stream, 's:' .. stream, '1')
  current = 1
else
  if redis.call('HGET', index, 'h:' .. stream) ~= node then return 0 end
  local stored = redis.call('HGET', call, 'version')
  if not stored or tonumber(stored) ~= tonumber(ARGV[2]) or redis.call('HGET', call, 'done') == '1' then return 0 end
  current = tonumber(stored) + 1
  redis.call('HSET', call, 'version', current)
end
local function forget_round()
  local old = redis.call('HGET', call, 'qs')
  if old and old ~= '' then
    for question in string.gmatch(old, '[^\\n]+') do redis.call('HDEL', index, 'q:' .. question, 'a:' .. question) end
  end
end
if ARGV[6] ~= '' then redis.call('HSET', call, 'state', ARGV[6]) end
if ARGV[7] ~= '-' then
  forget_round()
  redis.call('HSET', call, 'qs', ARGV[7])
  for question in string.gmatch(ARGV[7], '[^\\n]+') do redis.call('HSET', index, 'q:' .. question, stream) end
end
local size = tonumber(redis.call('HGET', call, 'bytes') or '0')
local last = tonumber(redis.call('HGET', call, 'last') or '0')
for i = 14, #ARGV, 2 do
  local position = tonumber(ARGV[i])
  if position > last then
    redis.call('RPUSH', events, ARGV[i] .. '\\n' .. ARGV[i + 1])
    size = size + #ARGV[i + 1]
    last = position
  end
end
local count = redis.call('LLEN', events)
while count > 1 and (count > tonumber(ARGV[13]) or size > tonumber(ARGV[12])) do
  local dropped = redis.call('LPOP', events)
  size = size - (#dropped - string.find(dropped, '\\n'))
  count = count - 1
end
redis.call('HSET', call, 'bytes', size, 'last', last)
local ttl = ARGV[10]
if ARGV[9] == '1' then
  forget_round()
  redis.call('HDEL', index, 'h:' .. stream, 'r:' .. (redis.call('HGET', call, 'request') or ''))
  redis.call('HDEL', call, 'state', 'meta')
  redis.call('HSET', call, 'done', '1', 'qs', '')
  ttl = ARGV[11]
end
redis.call('PEXPIRE', call, ttl)
redis.call('PEXPIRE', events, ttl)
if redis.call('PTTL', index) < tonumber(ttl) then redis.call('PEXPIRE', index, ttl) end
return current
"""

# KEYS: call, events, index. ARGV: stream, node, the node lease key prefix.
_CLAIM = """
local call, events, index = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', call) == 0 then return false end
local last = redis.call('HGET', call, 'last') or '0'
if redis.call('HGET', call, 'done') == '1' then
  return {'done', last, unpack(redis.call('LRANGE', events, 0, -1))}
end
local holder = redis.call('HGET', index, 'h:' .. ARGV[1]) or ''
if holder ~= '' and holder ~= ARGV[2] and redis.call('EXISTS', ARGV[3] .. holder) == 1 then
  return {'held', last, holder}
end
local version = redis.call('HINCRBY', call, 'version', 1)
redis.call('HSET', index, 'h:' .. ARGV[1], ARGV[2])
local answers = {}
for question in string.gmatch(redis.call('HGET', call, 'qs') or '', '[^\\n]+') do
  local answer = redis.call('HGET', index, 'a:' .. question)
  if answer then
    answers[#answers + 1] = question
    answers[#answers + 1] = answer
  end
end
local reply = {'claimed', last, tostring(version), redis.call('HGET', call, 'meta') or '{}',
               redis.call('HGET', call, 'state') or '', tostring(#answers / 2)}
for _, item in ipairs(answers) do reply[#reply + 1] = item end
for _, item in ipairs(redis.call('LRANGE', events, 0, -1)) do reply[#reply + 1] = item end
return reply
"""

# KEYS: call, index. ARGV: stream, node, version.
_RELEASE = """
if redis.call('HGET', KEYS[2], 'h:' .. ARGV[1]) ~= ARGV[2] then return 0 end
local stored = redis.call('HGET', KEYS[1], 'version')
if not stored or tonumber(stored) ~= tonumber(ARGV[3]) or redis.call('HGET', KEYS[1], 'done') == '1' then return 0 end
redis.call('HSET', KEYS[2], 'h:' .. ARGV[1], '')
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""

# KEYS: call, events, index. ARGV: stream, the node lease key prefix.
_READ = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local holder = redis.call('HGET', KEYS[3], 'h:' .. ARGV[1]) or ''
local alive = '0'
if holder ~= '' and redis.call('EXISTS', ARGV[2] .. holder) == 1 then alive = '1' end
return {redis.call('HGET', KEYS[1], 'done') or '0', redis.call('HGET', KEYS[1], 'last') or '0', holder, alive,
        unpack(redis.call('LRANGE', KEYS[2], 0, -1))}
"""

# KEYS: index. ARGV: question, message, the node lease key prefix.
_ANSWER = """
local stream = redis.call('HGET', KEYS[1], 'q:' .. ARGV[1])
if not stream then return false end
redis.call('HSETNX', KEYS[1], 'a:' .. ARGV[1], ARGV[2])
local holder = redis.call('HGET', KEYS[1], 'h:' .. stream) or ''
local alive = '0'
if holder ~= '' and redis.call('EXISTS', ARGV[3] .. holder) == 1 then alive = '1' end
return {stream, holder, alive}
"""

# KEYS: index. ARGV: the call key prefix, the events key prefix.
_FORGET = """
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(name, 1, 2) == 's:' then
    local stream = string.sub(name, 3)
    redis.call('DEL', ARGV[1] .. stream, ARGV[2] .. stream)
  end
end
return redis.call('DEL', KEYS[1])
"""

# KEYS: the node's lease, the slots. ARGV: node, slot ('' for none), lease ms, the node lease key prefix.
_RENEW = """
if ARGV[2] ~= '' then
  local before = redis.call('HGET', KEYS[2], ARGV[2])
  if before and before ~= ARGV[1] then redis.call('DEL', ARGV[4] .. before) end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""


class RedisCalls(RedisScripts):
    """Recorded calls (:class:`~mrtr.carriers.tasks.calls.CallStore`) in the Redis ``client`` reaches."""

    def _keys(self, session: str, stream: str) -> list[str]:
        layout = self.layout
        return [layout.call(session, stream), layout.call_events(session, stream), layout.calls_of(session)]

    async def write(self, session: str, stream: str, *, node: str, version: int, created: Created | None,
                    state: bytes | None, pending: list[str] | None, events: list[tuple[int, bytes]], done: bool,
                    ttl: float) -> int:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.write`."""
        arguments: list[Any] = [
            node, version, "1" if created is not None else "0", created.request if created is not None else b"",
            created.meta if created is not None else b"", state or b"", "-" if pending is None else "\n".join(pending),
            stream, "1" if done else "0", milliseconds(ttl), milliseconds(FINISHED_TTL), MAX_EVENT_BYTES, KEPT_EVENTS]
        for position, data in events:
            arguments += [position, data]
        return int(await self._call(self._script(_WRITE, self._keys(session, stream), arguments)))

    async def claim(self, session: str, stream: str, node: str) -> Claim | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.claim`."""
        reply = await self._call(self._script(_CLAIM, self._keys(session, stream),
                                              [stream, node, self.layout.node_lease("")]))
        if reply is None:
            return None
        status, last = _text(reply[0]), int(reply[1])
        if status == "done":
            return Claim("done", events=_events(reply[2:]), last=last)
        if status == "held":
            return Claim("held", holder=_text(reply[2]), last=last)
        count = int(reply[5])
        answers = {_text(reply[6 + 2 * i]): _bytes(reply[7 + 2 * i]) for i in range(count)}
        return Claim("claimed", int(reply[2]), _bytes(reply[3]), _bytes(reply[4]), answers,
                     _events(reply[6 + 2 * count:]), last)

    async def release(self, session: str, stream: str, node: str, version: int) -> int:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.release`."""
        layout = self.layout
        return int(await self._call(self._script(_RELEASE, [layout.call(session, stream), layout.calls_of(session)],
                                                 [stream, node, version])))

    async def read(self, session: str, stream: str) -> Stored | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.read`."""
        reply = await self._call(self._script(_READ, self._keys(session, stream),
                                              [stream, self.layout.node_lease("")]))
        if reply is None:
            return None
        return Stored(_events(reply[4:]), int(reply[1]), _text(reply[0]) == "1", _text(reply[2]),
                      _text(reply[3]) == "1")

    async def answer(self, session: str, question: str, message: bytes) -> AnswerRoute | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.answer`."""
        reply = await self._call(self._script(_ANSWER, [self.layout.calls_of(session)],
                                              [question, message, self.layout.node_lease("")]))
        if reply is None:
            return None
        return AnswerRoute(_text(reply[0]), _text(reply[1]), _text(reply[2]) == "1")

    async def find(self, session: str, request: str) -> str | None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.find`."""
        found = await self._call(self._client.hget(self.layout.calls_of(session), "r:" + request))
        return None if found is None else _text(found)

    async def forget(self, session: str) -> None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.forget`."""
        layout = self.layout
        await self._call(self._script(_FORGET, [layout.calls_of(session)],
                                      [layout.call(session, ""), layout.call_events(session, "")]))

    async def hold_lease(self, node: str, slot: str | None, lease: float) -> None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.hold_lease`."""
        layout = self.layout
        await self._call(self._script(_RENEW, [layout.node_lease(node), layout.node_slots()],
                                      [node, slot or "", milliseconds(lease), layout.node_lease("")]))

    async def end_lease(self, node: str) -> None:
        """See :meth:`~mrtr.carriers.tasks.calls.CallStore.end_lease`."""
        await self._call(self._client.delete([self.layout.node_lease(node)]))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _events(items: list[Any]) -> list[tuple[int, bytes]]:
    events = []
    for item in items:
        raw = _bytes(item)
        position, _, data = raw.partition(b"\n")
        events.append((int(position), data))
    return events
