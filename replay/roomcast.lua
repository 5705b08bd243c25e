#!lua name=roomcast_v1

-- The roomcast Redis Function library: a room's sequence, bounded log and doorbell.
-- Every key of a room carries the room as its hash tag, so one call touches one slot:
--   room:{r}:seq        hash: epoch (this history's name), seq (last assigned)
--   room:{r}:log        stream, entry id <seq>-0, fields epoch ts type body, and exp
--                       (the deadline, Unix ms) for an event with a time to live
--   room:{r}:idem:<k>   string "<epoch> <seq> <ts>", with its own TTL
--   room:{r}:pods       hash: pod id -> "<members> <expires ms> <updated ms>", the
--                       pods holding the room (occupancy), expiring with its last record
--   room:{r}            shard channel, derived here from the key name (a channel is
--                       not a key: declared as one it never exists, and every call
--                       during a slot migration would fail with TRYAGAIN)
--   room:client:{c}     hash: boot, session, pod, since (Unix ms), identity, with a
--                       TTL: the connection that owns client id c (claim_as,
--                       refresh_as, release; claim and refresh for older pods);
--                       and ack:<room> "<epoch>:<seq> <Unix ms>", the client's last
--                       ack in each room, and acks, how many rooms have one (acks)
--   room:pod:{p}:live   hash: instance, host, pid, started, admin, refreshed (Unix
--                       ms), with a TTL: the live process that holds pod id p
--                       (pod, pod_release)
--   room:fleet:{streams} hash: pod id -> "<streams> <expires ms> <updated ms>", each
--                       pod's open connections, expiring with its last record
--                       (streams, streams_read)
-- Function names carry the library version, since Redis requires function names to
-- be unique across libraries: two versions can be loaded side by side during a
-- rolling upgrade.
--
-- Everything is validated before the first write: a function that fails half way
-- keeps the writes it made.

local ROOM_KEY = '^(room:{[%w%._~%-]+}):seq$'

local function fail(msg)
  return redis.error_reply('ERR roomcast: ' .. msg)
end

local function integer(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then
    return nil
  end
  return tonumber(s)
end

local function fmt(n)
  return string.format('%d', n)
end

-- The first seq retained in a log, or nil when the log is empty.
local function first_seq(log)
  local first = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)
  if #first == 0 then
    return nil
  end
  return tonumber(string.match(first[1][1], '^(%d+)'))
end

-- publish: KEYS seq, log [, idem]; ARGV candidate epoch, maxlen, history ttl ms,
-- idempotency ttl ms, type, body. Returns {epoch, seq, ts, duplicate (0 or 1)}.
-- publish_ttl takes the event's time to live in ms as a seventh argument: its
-- deadline, ts plus that, is stored as the entry's field exp and follows the type in
-- the doorbell ("<epoch> <seq> <ts> <type> <exp>"). name is the function's, for
-- errors.
local function publish_as(name, keys, args)
  if #keys < 2 or #keys > 3 then
    return fail(name .. ' takes 2 or 3 keys')
  end
  local room = string.match(keys[1], ROOM_KEY)
  if not room then
    return fail('bad seq key')
  end
  if keys[2] ~= room .. ':log' then
    return fail('bad log key')
  end
  local idem = keys[3]
  if idem and (#idem <= #room + 6 or string.sub(idem, 1, #room + 6) ~= room .. ':idem:') then
    return fail('bad idempotency key')
  end
  local nargs = 6
  if name == 'publish_ttl' then
    nargs = 7
  end
  if #args ~= nargs then
    return fail(name .. ' takes ' .. nargs .. ' arguments')
  end
  local epoch, maxlen, ttl, idem_ttl, typ, body = args[1], integer(args[2]), integer(args[3]), integer(args[4]), args[5], args[6]
  local life = nil
  if nargs == 7 then
    life = integer(args[7])
    if not life or life < 1 then
      return fail('bad event ttl')
    end
  end
  if #epoch < 1 or #epoch > 32 or not string.match(epoch, '^[%w_%-]+$') then
    return fail('bad epoch')
  end
  if not maxlen or maxlen < 1 or not ttl or ttl < 1 or not idem_ttl or idem_ttl < 1 then
    return fail('bad bound')
  end
  if #typ > 64 or not string.match(typ, '^[%w%._%-]*$') then
    return fail('bad type')
  end
  if #body == 0 then
    return fail('empty body')
  end

  if idem then
    local seen = redis.call('GET', idem)
    if seen then
      local e, s, t = string.match(seen, '^(%S+) (%d+) (%d+)$')
      if e then
        return {e, tonumber(s), tonumber(t), 1}
      end
    end
  end

  local now = redis.call('TIME')
  local ts = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local sts = fmt(ts)
  local sexp, bell_type = nil, typ
  if life then
    sexp = fmt(ts + life)
    bell_type = typ .. ' ' .. sexp
  end
  local function append(cur, seq)
    local res
    if sexp then
      res = redis.pcall('XADD', keys[2], 'MAXLEN', '~', maxlen, fmt(seq) .. '-0',
        'epoch', cur, 'ts', sts, 'type', typ, 'body', body, 'exp', sexp)
    else
      res = redis.pcall('XADD', keys[2], 'MAXLEN', '~', maxlen, fmt(seq) .. '-0',
        'epoch', cur, 'ts', sts, 'type', typ, 'body', body)
    end
    return type(res) ~= 'table' or not res.err
  end

  local head = redis.call('HMGET', keys[1], 'epoch', 'seq')
  local cur, seq = head[1], tonumber(head[2])
  -- A failed XADD writes nothing. It fails when the log's newest entry is not
  -- below seq or the key is not a stream: the history is inconsistent (a key lost
  -- or edited by hand), so it is replaced by a new one, as is a missing history.
  if cur and seq and append(cur, seq + 1) then
    seq = seq + 1
    redis.call('HSET', keys[1], 'seq', fmt(seq))
  else
    cur, seq = epoch, 1
    redis.call('DEL', keys[2])
    if not append(cur, seq) then
      return fail('cannot append to a new log')
    end
    redis.call('HSET', keys[1], 'epoch', cur, 'seq', fmt(seq))
  end
  local sseq = fmt(seq)
  if idem then
    redis.call('SET', idem, cur .. ' ' .. sseq .. ' ' .. sts, 'PX', idem_ttl)
  end
  redis.call('PEXPIRE', keys[1], ttl)
  redis.call('PEXPIRE', keys[2], ttl)
  redis.call('SPUBLISH', room, cur .. ' ' .. sseq .. ' ' .. sts .. ' ' .. bell_type .. '\n' .. body)
  return {cur, seq, ts, 0}
end

local function publish(keys, args)
  return publish_as('publish', keys, args)
end

local function publish_ttl(keys, args)
  return publish_as('publish_ttl', keys, args)
end

-- since: KEYS seq, log; ARGV epoch of the position ('' for the current one), its
-- seq, that seq plus one, limit. Returns {head epoch ('' for no history), head seq,
-- gap (0 or 1), entries}. A gap means the position cannot be continued: another
-- epoch, ahead of the head, or older than the first retained entry.
local function since(keys, args)
  if #keys ~= 2 then
    return fail('since takes 2 keys')
  end
  local room = string.match(keys[1], ROOM_KEY)
  if not room or keys[2] ~= room .. ':log' then
    return fail('bad keys')
  end
  if #args ~= 4 then
    return fail('since takes 4 arguments')
  end
  local after_epoch, after, from, limit = args[1], integer(args[2]), args[3], integer(args[4])
  if #after_epoch > 32 or not string.match(after_epoch, '^[%w_%-]*$') then
    return fail('bad epoch')
  end
  if not after or integer(from) ~= after + 1 or not limit then
    return fail('bad position')
  end

  local head = redis.call('HMGET', keys[1], 'epoch', 'seq')
  local cur, seq = head[1], tonumber(head[2])
  if not cur or not seq then
    if after ~= 0 or after_epoch ~= '' then
      return {'', 0, 1, {}}
    end
    return {'', 0, 0, {}}
  end
  if (after_epoch ~= '' and after_epoch ~= cur) or after > seq then
    return {cur, seq, 1, {}}
  end
  if after == seq then
    return {cur, seq, 0, {}}
  end
  local first = first_seq(keys[2])
  if not first or after + 1 < first then
    return {cur, seq, 1, {}}
  end
  if limit == 0 then
    return {cur, seq, 0, {}}
  end
  return {cur, seq, 0, redis.call('XRANGE', keys[2], from, '+', 'COUNT', limit)}
end

-- The pods holding a room, by server time in Unix ms.
local PODS_KEY = '^room:{[%w%._~%-]+}:pods$'

local function valid_pod(pod)
  return #pod >= 1 and #pod <= 253 and not string.find(pod, '[^!-~]')
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- set_record writes pod's record "<count> <expires ms> <updated ms>" in the hash key
-- (keep false: deletes it), drops expired records, those that do not match form
-- (whose capture is the expiry) and fields that name no pod, and makes the key
-- expire with the last record in force. Returns the records left.
local function set_record(key, pod, count, keep, ttl, form)
  local now = now_ms()
  if keep then
    redis.call('HSET', key, pod, fmt(count) .. ' ' .. fmt(now + ttl) .. ' ' .. fmt(now))
  else
    redis.call('HDEL', key, pod)
  end
  local all = redis.call('HGETALL', key)
  local last, left = 0, 0
  for i = 1, #all, 2 do
    local expires = tonumber(string.match(all[i + 1], form) or '')
    if not expires or expires <= now or not valid_pod(all[i]) then
      redis.call('HDEL', key, all[i])
    else
      left = left + 1
      if expires > last then
        last = expires
      end
    end
  end
  if last > 0 then
    redis.call('PEXPIRE', key, last - now)
  end
  return left
end

-- occupancy: KEYS pods; ARGV pod id, members, ttl ms. Records that the pod holds
-- that many members of the room until ttl passes (members 0: forgets the pod's
-- record), drops expired and malformed records and fields that name no pod, and
-- makes the key expire with the last record in force. Returns the records left.
local function occupancy(keys, args)
  if #keys ~= 1 or not string.match(keys[1], PODS_KEY) then
    return fail('bad pods key')
  end
  if #args ~= 3 then
    return fail('occupancy takes 3 arguments')
  end
  local pod, members, ttl = args[1], integer(args[2]), integer(args[3])
  if not valid_pod(pod) then
    return fail('bad pod')
  end
  if not members or not ttl or ttl < 1 then
    return fail('bad count')
  end

  return set_record(keys[1], pod, members, members > 0, ttl, '^[1-9]%d* (%d+) %d+$')
end

-- occupancy_read: KEYS pods. Returns {server time in Unix ms, the records as
-- HGETALL gives them}; the caller drops the expired ones.
local function occupancy_read(keys, args)
  if #keys ~= 1 or not string.match(keys[1], PODS_KEY) or #args ~= 0 then
    return fail('bad occupancy read')
  end
  return {now_ms(), redis.call('HGETALL', keys[1])}
end

-- Client ownership. A boot is a UUIDv7 in canonical lowercase form; boots compare
-- byte by byte, which orders them by their 48-bit millisecond timestamp, then the
-- rest (Lua's < on strings follows the locale's collation, so it is not used).
local CLIENT_KEY = '^room:client:{[%w%._~:%-]+}$'

-- valid_boot reports whether s is 8-4-4-4-12 lowercase hex digits, version 7,
-- variant 10.
local function valid_boot(s)
  if type(s) ~= 'string' or #s ~= 36 or string.find(s, '[A-F]') then
    return false
  end
  local a, b, c, d, e = string.match(s, '^(%x+)%-(%x+)%-(7%x+)%-([89ab]%x+)%-(%x+)$')
  return a ~= nil and #a == 8 and #b == 4 and #c == 4 and #d == 4 and #e == 12
end

local function client_key(keys)
  if #keys ~= 1 or #keys[1] > 128 + 14 or not string.match(keys[1], CLIENT_KEY) then
    return nil
  end
  return keys[1]
end

local function valid_session(s)
  return type(s) == 'string' and #s >= 1 and #s <= 64 and string.match(s, '^[%w_%-]+$') ~= nil
end

-- older reports whether boot a sorts before boot b.
local function older(a, b)
  for i = 1, 36 do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end

-- valid_identity reports whether s is 1 to 320 bytes (the caller checks UTF-8).
local function valid_identity(s)
  return type(s) == 'string' and #s >= 1 and #s <= 320
end

-- owner_start checks the KEYS and ARGV of name (claim: boot, session, pod, ttl ms;
-- claim_as and refresh_as: those and identity) and reads the entry. It returns the
-- key, {boot, session, pod, ttl, identity (nil for claim)} and the entry's {boot,
-- session, pod, since, identity} (false each when absent); or nil and the error.
local function owner_start(name, keys, args, with_identity)
  local key = client_key(keys)
  if not key then
    return nil, fail('bad client key')
  end
  local n = with_identity and 5 or 4
  if #args ~= n then
    return nil, fail(name .. ' takes ' .. n .. ' arguments')
  end
  local a = {args[1], args[2], args[3], integer(args[4]), args[5]}
  if not valid_boot(a[1]) then
    return nil, fail('bad boot')
  end
  if not valid_session(a[2]) or type(a[3]) ~= 'string' or not valid_pod(a[3]) then
    return nil, fail('bad session or pod')
  end
  if not a[4] or a[4] < 1 then
    return nil, fail('bad ttl')
  end
  if with_identity and not valid_identity(a[5]) then
    return nil, fail('bad identity')
  end
  return key, a, redis.call('HMGET', key, 'boot', 'session', 'pod', 'since', 'identity')
end

-- write_owner makes a (owner_start's) the owner of key, claimed now; an identity
-- only when a has one.
local function write_owner(key, a)
  redis.call('DEL', key)
  local since = fmt(now_ms())
  if a[5] then
    redis.call('HSET', key, 'boot', a[1], 'session', a[2], 'pod', a[3], 'since', since, 'identity', a[5])
  else
    redis.call('HSET', key, 'boot', a[1], 'session', a[2], 'pod', a[3], 'since', since)
  end
  redis.call('PEXPIRE', key, a[4])
end

-- claim: KEYS client key; ARGV boot, session, pod, ttl ms. Returns {claimed (1, or 0
-- when a newer boot holds the client and nothing changed), boot, session, pod,
-- since} of the entry it displaced or that refused it ('' each when none). What pods
-- of an older version call during a rollout; it writes no identity (claim_as).
local function claim(keys, args)
  local key, a, cur = owner_start('claim', keys, args, false)
  if not key then
    return a
  end
  local was = {cur[1] or '', cur[2] or '', cur[3] or '', cur[4] or ''}
  -- An entry whose boot is malformed (not written here) never refuses a claim.
  if valid_boot(cur[1]) and older(a[1], cur[1]) then
    return {0, was[1], was[2], was[3], was[4]}
  end
  write_owner(key, a)
  return {1, was[1], was[2], was[3], was[4]}
end

-- claim_as: KEYS client key; ARGV boot, session, pod, ttl ms, identity. Claims the
-- client as claim does, for one identity: while the entry of another identity lives,
-- nobody else may claim it. Returns {status, boot, session, pod, since, identity} of
-- the entry it displaced or that refused it ('' each when none): status 1 claimed,
-- 0 a newer boot holds the client, 2 another identity holds it (nothing changed
-- then). An entry without an identity (claim, an older pod's) binds none; nor does
-- one whose boot is malformed (not written here).
local function claim_as(keys, args)
  local key, a, cur = owner_start('claim_as', keys, args, true)
  if not key then
    return a
  end
  local was = {cur[1] or '', cur[2] or '', cur[3] or '', cur[4] or '', cur[5] or ''}
  if valid_boot(cur[1]) then
    if was[5] ~= '' and was[5] ~= a[5] then
      return {2, was[1], was[2], was[3], was[4], was[5]}
    end
    if older(a[1], cur[1]) then
      return {0, was[1], was[2], was[3], was[4], was[5]}
    end
  end
  write_owner(key, a)
  return {1, was[1], was[2], was[3], was[4], was[5]}
end

-- refresh_as: KEYS client key; ARGV boot, session, pod, ttl ms, identity. Sets the
-- TTL while session owns the client (1); claims it again when there is no entry at
-- all (2: it expired, or Redis lost it); else changes nothing (0).
local function refresh_as(keys, args)
  local key, a, cur = owner_start('refresh_as', keys, args, true)
  if not key then
    return a
  end
  if cur[2] == a[2] then
    redis.call('PEXPIRE', key, a[4])
    return 1
  end
  if cur[1] or cur[2] or cur[3] or cur[4] or cur[5] then
    return 0
  end
  write_owner(key, a)
  return 2
end

-- refresh: KEYS client key; ARGV session, ttl ms. Sets the TTL only while session
-- owns the client. Returns 1 when it did, 0 when session is not the owner. What pods
-- of an older version call during a rollout (refresh_as).
local function refresh(keys, args)
  local key = client_key(keys)
  if not key then
    return fail('bad client key')
  end
  if #args ~= 2 then
    return fail('refresh takes 2 arguments')
  end
  local session, ttl = args[1], integer(args[2])
  if not valid_session(session) or not ttl or ttl < 1 then
    return fail('bad session or ttl')
  end
  if redis.call('HMGET', key, 'session')[1] ~= session then
    return 0
  end
  redis.call('PEXPIRE', key, ttl)
  return 1
end

-- release: KEYS client key; ARGV session. Deletes the entry only while session owns
-- the client. Returns 1 when it did, else 0.
local function release(keys, args)
  local key = client_key(keys)
  if not key then
    return fail('bad client key')
  end
  if #args ~= 1 or not valid_session(args[1]) then
    return fail('bad session')
  end
  if redis.call('HMGET', key, 'session')[1] ~= args[1] then
    return 0
  end
  redis.call('DEL', key)
  return 1
end

-- acks: KEYS client key; ARGV session, then pairs of room and ack ("<epoch>:<seq>
-- <Unix ms>"). Sets the field ack:<room> of each while session owns the client,
-- for at most 256 rooms (acks of further rooms are dropped), counting the rooms in
-- the field acks. Returns 1 when it did, 0 when session is not the owner (or there
-- is no entry), and changes nothing then.
local ACK_ROOM = '^[%w%._~%-]+$'
local ACK_VALUE = '^[^%s:]+:%d+ %d+$'
local MAX_ACK_ROOMS = 256
local function acks(keys, args)
  local key = client_key(keys)
  if not key then
    return fail('bad client key')
  end
  if #args < 3 or #args % 2 ~= 1 or #args > 1 + 2 * MAX_ACK_ROOMS or not valid_session(args[1]) then
    return fail('acks takes a session and pairs of room and ack')
  end
  for i = 2, #args, 2 do
    local room, ack = args[i], args[i + 1]
    if #room > 128 or not string.match(room, ACK_ROOM) or #ack > 128 or not string.match(ack, ACK_VALUE) then
      return fail('bad room or ack')
    end
  end
  local cur = redis.call('HMGET', key, 'session', 'acks')
  if cur[1] ~= args[1] then
    return 0
  end
  local rooms = integer(cur[2]) or 0
  for i = 2, #args, 2 do
    local field = 'ack:' .. args[i]
    if rooms < MAX_ACK_ROOMS or redis.call('HMGET', key, field)[1] then
      rooms = rooms + redis.call('HSET', key, field, args[i + 1])
    end
  end
  redis.call('HSET', key, 'acks', fmt(rooms))
  return 1
end

-- Pods' liveness records: one live process per pod id. A record's instance is
-- random, made once per process start, so a process knows its own record.
local POD_KEY = '^room:pod:{(.+)}:live$'

local function pod_key(keys)
  if #keys ~= 1 or type(keys[1]) ~= 'string' or #keys[1] > 253 + 15 then
    return nil
  end
  local id = string.match(keys[1], POD_KEY)
  if not id or not valid_pod(id) then
    return nil
  end
  return keys[1]
end

-- valid_pod_field reports whether s may be a record's host or admin address: '' or
-- a pod id's form.
local function valid_pod_field(s)
  return type(s) == 'string' and (s == '' or valid_pod(s))
end

-- pod: KEYS pod key; ARGV instance, host, pid, started (Unix ms), admin, ttl ms.
-- Makes the record the pod id's for ttl when no record holds it (status 2), or
-- extends it and marks it refreshed when the same instance holds it (status 1);
-- else changes nothing (status 0). Returns {status, the record that holds the id
-- as HGETALL gives it (status 0), else {}}.
local function pod(keys, args)
  local key = pod_key(keys)
  if not key then
    return fail('bad pod key')
  end
  if #args ~= 6 then
    return fail('pod takes 6 arguments')
  end
  local instance, host, pid, started, admin, ttl =
    args[1], args[2], integer(args[3]), integer(args[4]), args[5], integer(args[6])
  if not valid_session(instance) or not valid_pod_field(host) or not valid_pod_field(admin) then
    return fail('bad pod record')
  end
  if not pid or not started or started < 1 or not ttl or ttl < 1 then
    return fail('bad count')
  end
  local cur = redis.call('HMGET', key, 'instance')[1]
  if cur == instance then
    redis.call('HSET', key, 'refreshed', fmt(now_ms()))
    redis.call('PEXPIRE', key, ttl)
    return {1, {}}
  end
  if cur then
    return {0, redis.call('HGETALL', key)}
  end
  -- No instance: no record, or a malformed one, which no live pod refreshes.
  redis.call('DEL', key)
  redis.call('HSET', key, 'instance', instance, 'host', host, 'pid', fmt(pid), 'started', fmt(started),
    'admin', admin, 'refreshed', fmt(now_ms()))
  redis.call('PEXPIRE', key, ttl)
  return {2, {}}
end

-- pod_release: KEYS pod key; ARGV instance. Deletes the record only while instance
-- holds it. Returns 1 when it did, else 0.
local function pod_release(keys, args)
  local key = pod_key(keys)
  if not key then
    return fail('bad pod key')
  end
  if #args ~= 1 or not valid_session(args[1]) then
    return fail('bad instance')
  end
  if redis.call('HMGET', key, 'instance')[1] ~= args[1] then
    return 0
  end
  redis.call('DEL', key)
  return 1
end

-- Each pod's open connections, one hash for the fleet (one slot): a pod compares
-- itself with the fleet's mean. A count of 0 is a record (an empty pod counts).
local STREAMS_KEY = 'room:fleet:{streams}'

-- streams: KEYS streams key; ARGV pod id, streams, ttl ms (ttl 0: forgets the pod's
-- record). Drops expired and malformed records and makes the key expire with the
-- last record in force. Returns the records left.
local function streams(keys, args)
  if #keys ~= 1 or keys[1] ~= STREAMS_KEY then
    return fail('bad streams key')
  end
  if #args ~= 3 then
    return fail('streams takes 3 arguments')
  end
  local pod, n, ttl = args[1], integer(args[2]), integer(args[3])
  if not valid_pod(pod) then
    return fail('bad pod')
  end
  if not n or not ttl then
    return fail('bad count')
  end
  return set_record(keys[1], pod, n, ttl > 0, ttl, '^%d+ (%d+) %d+$')
end

-- streams_read: KEYS streams key. Returns {server time in Unix ms, the records as
-- HGETALL gives them}; the caller drops the expired ones.
local function streams_read(keys, args)
  if #keys ~= 1 or keys[1] ~= STREAMS_KEY or #args ~= 0 then
    return fail('bad streams read')
  end
  return {now_ms(), redis.call('HGETALL', keys[1])}
end

redis.register_function('roomcast_v1_publish', publish)
redis.register_function('roomcast_v1_publish_ttl', publish_ttl)
redis.register_function{function_name = 'roomcast_v1_since', callback = since, flags = {'no-writes'}}
redis.register_function('roomcast_v1_occupancy', occupancy)
redis.register_function{function_name = 'roomcast_v1_occupancy_read', callback = occupancy_read, flags = {'no-writes'}}
redis.register_function('roomcast_v1_claim', claim)
redis.register_function('roomcast_v1_refresh', refresh)
redis.register_function('roomcast_v1_release', release)
redis.register_function('roomcast_v1_claim_as', claim_as)
redis.register_function('roomcast_v1_refresh_as', refresh_as)
redis.register_function('roomcast_v1_acks', acks)
redis.register_function('roomcast_v1_pod', pod)
redis.register_function('roomcast_v1_pod_release', pod_release)
redis.register_function('roomcast_v1_streams', streams)
redis.register_function{function_name = 'roomcast_v1_streams_read', callback = streams_read, flags = {'no-writes'}}
