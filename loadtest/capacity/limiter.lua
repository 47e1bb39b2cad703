
local elapsed = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local shield_limit = tonumber(ARGV[3])
local key_limit = tonumber(ARGV[4])
local function charge(cur_key, prev_key, limit)
  local cur = tonumber(redis.call('GET', cur_key) or '0')
  local prev = tonumber(redis.call('GET', prev_key) or '0')
  if prev * (window - elapsed) / window + cur + 1 <= limit then
    cur = redis.call('INCR', cur_key)
    if cur == 1 then redis.call('PEXPIRE', cur_key, window * 2) end
    return 1, cur, prev
  end
  return 0, cur, prev
end
local sa, sc, sp = 1, 0, 0
if shield_limit > 0 then sa, sc, sp = charge(KEYS[1], KEYS[2], shield_limit) end
if #KEYS < 7 then return {sa, sc, sp} end
local ka, kc, kp = 0, 0, 0
if sa == 1 then ka, kc, kp = charge(KEYS[3], KEYS[4], key_limit) end
local kv = redis.call('GET', KEYS[5])
local uv = redis.call('GET', KEYS[6])
local lu = redis.call('GET', KEYS[7])
if sa == 1 then redis.call('SET', KEYS[7], ARGV[5]) end
return {sa, sc, sp, ka, kc, kp, kv, uv, lu}
