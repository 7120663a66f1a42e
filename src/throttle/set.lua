-- `syncfleet gate set`: a fleet-wide override of one gate's rate (and burst).
-- KEYS: 1 conf, 2 aimd. ARGV: 1 rate, 2 burst ('' = keep), 3 who/when note.
-- Returns the previous override {rate or '', burst or ''}.
local old = redis.call('HMGET', KEYS[1], 'rate', 'burst')
redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'at', ARGV[3])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'burst', ARGV[2]) end
-- The adaptive state restarts from the new rate on the next acquisition.
redis.call('DEL', KEYS[2])
return {old[1] or '', old[2] or ''}
