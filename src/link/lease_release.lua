-- Give a lease back, only if we still hold it. KEYS[1] lease, ARGV[1] holder.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
