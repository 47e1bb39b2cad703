-- wrk script of loadtest/hotpath_bench.py: one script for every line,
-- driven by the environment (wrk passes its own to each thread's Lua
-- state):
--
--   HOT_MODE   get | list | create
--   HOT_TOKEN  the API key (Authorization: Bearer)
--   HOT_TABLE  the table id
--   HOT_IDS    get: a file of record ids, one a line (picked at random)
--   HOT_QUERY  list: the query string after `?` (empty: a plain first page)
--
--   wrk -t2 -c8 -d20s --latency -s loadtest/hotpath/hotpath.lua $ROUTER_URL
--
-- get:    GET /api/tables/{HOT_TABLE}/records/{random id}
-- list:   GET /api/tables/{HOT_TABLE}/records[?HOT_QUERY]
-- create: POST /api/tables/{HOT_TABLE}/records, one record with the five
--         fields (Name, Amount, Status, Due, Notes), values drawn per request.
--
-- done() prints one line `HOTPATH_JSON {...}`: requests, duration (µs),
-- errors by kind (status = non-2xx/3xx answers), latency p50/p90/p99/max,
-- mean and stdev (µs).

local mode = os.getenv("HOT_MODE") or "list"
local token = os.getenv("HOT_TOKEN") or ""
local table_id = os.getenv("HOT_TABLE") or ""
local base = "/api/tables/" .. table_id .. "/records"

wrk.headers["Authorization"] = "Bearer " .. token
if mode == "create" then
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
end

local ids = {}
-- thread_no: a global set by setup() before init()
local counter = 0
local statuses = { "todo", "doing", "done", "blocked" }
local notes = "Create line of the hot path benchmark: a record with five fields, "
   .. "written through the router and the shard node in one request."
-- 2025-01-01 00:00:00 UTC
local due_base = 1735689600

local threads = {}
function setup(thread)
   thread:set("thread_no", #threads + 1)
   table.insert(threads, thread)
end

function init(args)
   math.randomseed(os.time() * 1000 + (thread_no or 0) * 7919)
   if mode == "get" then
      local f = assert(io.open(os.getenv("HOT_IDS"), "r"))
      for line in f:lines() do
         if #line > 0 then ids[#ids + 1] = line end
      end
      f:close()
      assert(#ids > 0, "HOT_IDS is empty")
   end
end

local list_path = base
do
   local q = os.getenv("HOT_QUERY") or ""
   if #q > 0 then list_path = base .. "?" .. q end
end

function request()
   if mode == "get" then
      return wrk.format("GET", base .. "/" .. ids[math.random(#ids)])
   elseif mode == "create" then
      counter = counter + 1
      local body = string.format(
         '{"records":[{"fields":{"Name":"bench %d-%d","Amount":%.2f,"Status":"%s","Due":"%s","Notes":"%s"}}]}',
         thread_no or 0, counter, math.random(0, 100000) / 100,
         statuses[math.random(4)],
         os.date("!%Y-%m-%d", due_base + math.random(0, 729) * 86400), notes)
      return wrk.format("POST", base, nil, body)
   else
      return wrk.format("GET", list_path)
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'HOTPATH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,'
         .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
         .. '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f,"stdev":%.1f}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.max, latency.mean, latency.stdev))
end
