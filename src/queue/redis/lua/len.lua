-- KEYS: stream, delayed, dead, ready. ARGV: group.
-- Returns [xlen, pending, delayed, dead, ready].
local pending = 0
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(p) == 'table' and p.err == nil then pending = p[1] end
return {redis.call('XLEN', KEYS[1]), pending, redis.call('ZCARD', KEYS[2]), redis.call('XLEN', KEYS[3]), redis.call('ZCARD', KEYS[4])}
