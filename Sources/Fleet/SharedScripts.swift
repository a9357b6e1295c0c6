/// The Lua scripts the shared tier runs in Redis, each one round trip and
/// atomic (see `SharedKeys` for what they touch).
enum SharedScripts {
    /// A key's variants, each only when its record is at most ARGV[2]
    /// bytes (learnt with HSTRLEN first, so a huge value planted under a
    /// shared key is never sent, nor read). ARGV: the object's key, the
    /// bound. Returns the number skipped, then field, record, field, record...
    static let lookup = """
        local obj, bound = ARGV[1], tonumber(ARGV[2])
        local out, skipped = {0}, 0
        for _, field in ipairs(redis.call('HKEYS', obj)) do
          if redis.call('HSTRLEN', obj, field) <= bound then
            out[#out + 1] = field
            out[#out + 1] = redis.call('HGET', obj, field)
          else
            skipped = skipped + 1
          end
        end
        out[1] = skipped
        return out
        """

    /// Stores a variant. ARGV: prefix, key, variant field, record, lifetime
    /// (ms), the fetch's mark (ms, sequence), tags... Refused (0) when a
    /// purge entered the stream after the mark: the response may predate it.
    static let store = """
        local p, key = ARGV[1], ARGV[2]
        local last = redis.call('XREVRANGE', p .. 'purges', '+', '-', 'COUNT', 1)
        if #last > 0 then
          local ms, seq = string.match(last[1][1], '^(%d+)%-(%d+)$')
          ms, seq = tonumber(ms), tonumber(seq)
          local mms, mseq = tonumber(ARGV[6]), tonumber(ARGV[7])
          if ms > mms or (ms == mms and seq > mseq) then return 0 end
        end
        local obj = p .. 'obj:' .. key
        local ttl = tonumber(ARGV[5])
        redis.call('HSET', obj, ARGV[3], ARGV[4])
        if redis.call('PTTL', obj) < ttl then redis.call('PEXPIRE', obj, ttl) end
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZADD', p .. 'keys', 0, key)
        if tonumber(redis.call('ZSCORE', p .. 'expiry', key) or '0') < now + ttl then
          redis.call('ZADD', p .. 'expiry', now + ttl, key)
        end
        for i = 8, #ARGV do
          local tag = p .. 'tag:' .. ARGV[i]
          redis.call('SADD', tag, key)
          if redis.call('PTTL', tag) < ttl then redis.call('PEXPIRE', tag, ttl) end
        end
        local gone = redis.call('ZRANGEBYSCORE', p .. 'expiry', '-inf', now, 'LIMIT', 0, 8)
        for _, k in ipairs(gone) do
          if redis.call('EXISTS', p .. 'obj:' .. k) == 0 then redis.call('ZREM', p .. 'keys', k) end
          redis.call('ZREM', p .. 'expiry', k)
        end
        return 1
        """

    /// Removes what a purge matches from the shared tier and appends the
    /// purge to the stream, at once: no node reads the purge while the
    /// tier still holds what it removes. ARGV: prefix, kind (keys, prefix,
    /// tag, all), target, the range's upper bound, stream length, number
    /// of keys, keys..., number of key prefixes, prefixes... (with keys: a
    /// path on every virtual host), number of tags, tags... (with keys: the
    /// URL's cached POST queries), the stream entry's fields... Returns the
    /// entry's ID.
    static let purge = """
        local p, kind, target = ARGV[1], ARGV[2], ARGV[3]
        local n = tonumber(ARGV[6])
        local m = tonumber(ARGV[7 + n])
        local t = tonumber(ARGV[8 + n + m])
        local keys = {}
        if kind == 'keys' then
          for i = 7, 6 + n do keys[#keys + 1] = ARGV[i] end
          for i = 8 + n, 7 + n + m do
            local pre = ARGV[i]
            local upper = '(' .. string.sub(pre, 1, -2) .. string.char(string.byte(pre, -1) + 1)
            for _, k in ipairs(redis.call('ZRANGEBYLEX', p .. 'keys', '[' .. pre, upper)) do keys[#keys + 1] = k end
          end
          for i = 9 + n + m, 8 + n + m + t do
            for _, k in ipairs(redis.call('SMEMBERS', p .. 'tag:' .. ARGV[i])) do keys[#keys + 1] = k end
            redis.call('DEL', p .. 'tag:' .. ARGV[i])
          end
        elseif kind == 'prefix' then
          keys = redis.call('ZRANGEBYLEX', p .. 'keys', '[' .. target, ARGV[4])
        elseif kind == 'tag' then
          keys = redis.call('SMEMBERS', p .. 'tag:' .. target)
          redis.call('DEL', p .. 'tag:' .. target)
        elseif kind == 'all' then
          keys = redis.call('ZRANGE', p .. 'keys', 0, -1)
        end
        for _, k in ipairs(keys) do
          redis.call('DEL', p .. 'obj:' .. k)
          redis.call('ZREM', p .. 'keys', k)
          redis.call('ZREM', p .. 'expiry', k)
        end
        return redis.call('XADD', p .. 'purges', 'MAXLEN', '~', ARGV[5], '*', unpack(ARGV, 9 + n + m + t))
        """

    /// Claims the fetch of a key across the fleet. ARGV: prefix, key, this
    /// claim's token ("NODE:RANDOM"), this node's prefix of it ("NODE:"),
    /// how long it may hold (ms). 1: claimed; 2: stored meanwhile (look
    /// again); 0: another node fetches it (this one is noted as waiting,
    /// so that node's release publishes a wake-up). A claim this node
    /// holds already is left over (a node claims a key once at a time: a
    /// release Redis lost, a node restarted): taken over.
    static let claim = """
        local p, key = ARGV[1], ARGV[2]
        if redis.call('EXISTS', p .. 'obj:' .. key) == 1 then return 2 end
        local lock = p .. 'lock:' .. key
        if redis.call('SET', lock, ARGV[3], 'NX', 'PX', ARGV[5]) then return 1 end
        local holder = redis.call('GET', lock)
        if holder and string.sub(holder, 1, #ARGV[4]) == ARGV[4] then
          redis.call('SET', lock, ARGV[3], 'PX', ARGV[5])
          return 1
        end
        redis.call('SET', lock .. ':waiting', '1', 'PX', ARGV[5])
        return 0
        """

    /// Releases a claim (only this claim's: one that expired and was taken
    /// by another node stays) and wakes the nodes waiting for it. ARGV:
    /// prefix, key, token.
    static let release = """
        local p, key = ARGV[1], ARGV[2]
        local lock = p .. 'lock:' .. key
        if redis.call('GET', lock) == ARGV[3] then redis.call('DEL', lock) end
        if redis.call('DEL', lock .. ':waiting') == 1 then redis.call('PUBLISH', p .. 'fetched', key) end
        return 1
        """
}
