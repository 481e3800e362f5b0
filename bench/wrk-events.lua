-- wrk script: replays pre-generated, signed Feishu event callbacks (see
-- examples/loadgen.rs), each one exactly once.
--
--   wrk -t2 -c64 -d10s --latency -s bench/wrk-events.lua \
--       http://127.0.0.1:8080/webhook/bench/event -- file=events.tsv threads=2
--
-- Script arguments (after "--", key=value; environment variables as fallbacks):
--   file=PATH        the loadgen output                      (WRK_EVENTS_FILE)
--   threads=N        the -t value; required to slice the file (WRK_EVENTS_THREADS)
--   rate=R           fixed total rate in requests/s; 0 = as fast as possible
--                    (WRK_EVENTS_RATE)
--   connections=C    the -c value; used for the fixed rate when LuaJIT's ffi is
--                    missing (WRK_EVENTS_CONNECTIONS)
--   wrap=1           reuse events when a slice runs out (only for receivers that do not
--                    deduplicate, e.g. the bare axum ceiling) (WRK_EVENTS_WRAP)
--
-- Each line of the file is "timestamp<TAB>nonce<TAB>signature<TAB>body". Every wrk
-- thread reads a disjoint byte range of the file (a line belongs to the thread whose
-- range holds its first byte) and sends its lines in order, so no event is sent twice
-- in one run. When a slice runs out without wrap=1, the thread sends GET requests to a
-- path that answers 404 (wrk cannot stop a thread from its own script), so the shortage
-- shows up as non-2xx responses and as a warning at the end: generate more events.
--
-- Fixed-rate mode defines wrk's delay() hook. With LuaJIT's ffi (wrk normally links
-- LuaJIT) each thread hands out send slots on a monotonic clock at rate/threads per
-- second; a connection that comes back late gets the next free slot (missed slots are
-- dropped, not bursted). Without ffi each connection waits connections/rate seconds
-- between requests, which undershoots the target by the response time.
--
-- Start barrier: wrk runs each thread's init() in its main thread and starts that thread
-- right away, so thread 0 would be sending while thread 1 still loads its slice, and
-- the run would look faster than it is. So each thread, once loaded, appends one byte
-- to a scratch file, and no thread sends before all have done so. wrk's own dry call of
-- request() on thread 0, made before the threads start, is let through and handed the
-- first event without consuming it: every event of the file is sent.
--
-- done() prints one machine-readable line starting with "wrk-events: RESULT".

-- Main-state only (setup and done run in wrk's main Lua state).
local threads = {}
local barrier_file = nil

function setup(thread)
   if barrier_file == nil then
      barrier_file = os.tmpname()
   end
   thread:set("id", #threads)
   thread:set("barrier_path", barrier_file)
   table.insert(threads, thread)
end

local function option(opts, key, env)
   local v = opts[key]
   if v == nil or v == "" then
      v = os.getenv(env)
   end
   if v == "" then
      return nil
   end
   return v
end

-- Per-thread state (each wrk thread has its own Lua state).
local queue = {}
local count = 0
local next_index = 1
local wrap = false
issued = 0        -- request() calls (read by done() through thread:get)
exhausted = 0     -- requests sent after the slice ran out
wrapped = 0       -- times the slice was restarted (wrap=1)
slice = 0         -- events in this thread's slice
load_ms = 0       -- time spent loading the slice

local exhausted_request
local nthreads = 1
local released = false
local sleep_ms = nil

-- A monotonic millisecond clock and a millisecond sleep, from LuaJIT's ffi (nil, nil
-- without it).
local function ffi_clock()
   local ok, ffi = pcall(require, "ffi")
   if not ok then
      return nil, nil
   end
   local defined = pcall(ffi.cdef, [[
      typedef struct { long tv_sec; long tv_nsec; } wrk_events_timespec;
      int clock_gettime(int clock_id, wrk_events_timespec *tp);
      int poll(void *fds, unsigned long nfds, int timeout);
   ]])
   if not defined then
      return nil, nil
   end
   local ts = ffi.new("wrk_events_timespec")
   local CLOCK_MONOTONIC = 1
   local function now()
      ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
      return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
   end
   local function sleep(ms)
      ffi.C.poll(nil, 0, ms)
   end
   return now, sleep
end

local function arrived()
   local f = io.open(barrier_path, "rb")
   if not f then
      return 0
   end
   local n = #(f:read("*a") or "")
   f:close()
   return n
end

local function wait_for_all_threads()
   released = true
   if not sleep_ms then
      return
   end
   local waited = 0
   while arrived() < nthreads do
      if waited > 120000 then
         io.stderr:write("wrk-events: WARNING: start barrier timed out\n")
         return
      end
      sleep_ms(1)
      waited = waited + 1
   end
end

function init(args)
   local opts = {}
   for _, a in ipairs(args) do
      local k, v = a:match("^([%w_]+)=(.*)$")
      if not k then
         error("wrk-events.lua: arguments are key=value, got '" .. a .. "'")
      end
      opts[k] = v
   end
   local path = option(opts, "file", "WRK_EVENTS_FILE")
   if not path then
      error("wrk-events.lua: pass file=PATH after '--' (or set WRK_EVENTS_FILE)")
   end
   nthreads = tonumber(option(opts, "threads", "WRK_EVENTS_THREADS") or "1")
   local rate = tonumber(option(opts, "rate", "WRK_EVENTS_RATE") or "0")
   local connections = tonumber(option(opts, "connections", "WRK_EVENTS_CONNECTIONS") or "0")
   wrap = option(opts, "wrap", "WRK_EVENTS_WRAP") == "1"
   if id >= nthreads then
      error(string.format(
         "wrk-events.lua: thread %d but threads=%d; pass the -t value as threads=N",
         id, nthreads))
   end

   local now_ms, sleep = ffi_clock()
   sleep_ms = sleep
   local t0 = now_ms and now_ms()

   -- The request line and fixed headers, built once.
   local host = wrk.headers["Host"]
   local head = "POST " .. wrk.path .. " HTTP/1.1\r\n" ..
      "Host: " .. host .. "\r\n" ..
      "Content-Type: application/json\r\n"
   exhausted_request = "GET /wrk-events-exhausted HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n"

   -- The slice only grows while loading: collecting garbage meanwhile would walk the
   -- growing heap again and again and make loading superlinear.
   collectgarbage("stop")
   local f = assert(io.open(path, "rb"))
   local size = f:seek("end")
   local lo = math.floor(size * id / nthreads)
   local hi = math.floor(size * (id + 1) / nthreads)
   local pos
   if lo == 0 then
      f:seek("set", 0)
      pos = 0
   else
      -- Skip the rest of the line that holds byte lo-1: it belongs to the previous slice.
      f:seek("set", lo - 1)
      local partial = f:read("*l") or ""
      pos = lo + #partial
   end
   local find, sub = string.find, string.sub
   while pos < hi do
      local line = f:read("*l")
      if not line then
         break
      end
      pos = pos + #line + 1
      if line ~= "" then
         local t1 = find(line, "\t", 1, true)
         local t2 = t1 and find(line, "\t", t1 + 1, true)
         local t3 = t2 and find(line, "\t", t2 + 1, true)
         if not t3 then
            error("wrk-events.lua: malformed line in " .. path)
         end
         local body = sub(line, t3 + 1)
         count = count + 1
         queue[count] = head ..
            "Content-Length: " .. #body .. "\r\n" ..
            "X-Lark-Request-Timestamp: " .. sub(line, 1, t1 - 1) .. "\r\n" ..
            "X-Lark-Request-Nonce: " .. sub(line, t1 + 1, t2 - 1) .. "\r\n" ..
            "X-Lark-Signature: " .. sub(line, t2 + 1, t3 - 1) .. "\r\n" ..
            "\r\n" .. body
      end
   end
   f:close()
   collectgarbage("restart")
   collectgarbage("collect")
   slice = count
   if t0 then
      load_ms = now_ms() - t0
   end
   if count == 0 then
      error("wrk-events.lua: thread " .. id .. " got no events from " .. path)
   end
   local b = assert(io.open(barrier_path, "ab"))
   b:write("x")
   b:close()

   if rate and rate > 0 then
      if now_ms then
         local interval = 1000 * nthreads / rate -- ms between sends of this thread
         local next_slot = nil
         function delay()
            local now = now_ms()
            if next_slot == nil or next_slot < now then
               next_slot = now
            end
            local wait = next_slot - now
            next_slot = next_slot + interval
            return math.floor(wait)
         end
      else
         if connections <= 0 then
            error("wrk-events.lua: rate without ffi needs connections=C (the -c value)")
         end
         local per_connection = math.floor(1000 * connections / rate)
         function delay()
            return per_connection
         end
      end
   end
end

function request()
   issued = issued + 1
   if not released then
      if id == 0 and issued == 1 then
         -- wrk's dry call: it only inspects the request and never sends it, so the
         -- event is not consumed (else a file of N events would store N - 1).
         return queue[1]
      end
      wait_for_all_threads()
   end
   if next_index > count then
      if wrap then
         next_index = 1
         wrapped = wrapped + 1
      else
         exhausted = exhausted + 1
         return exhausted_request
      end
   end
   local r = queue[next_index]
   next_index = next_index + 1
   return r
end

function done(summary, latency, requests)
   if barrier_file then
      os.remove(barrier_file)
   end
   local total_issued, total_exhausted, total_wrapped, total_slice = 0, 0, 0, 0
   local max_load = 0
   for _, t in ipairs(threads) do
      total_issued = total_issued + (t:get("issued") or 0)
      total_exhausted = total_exhausted + (t:get("exhausted") or 0)
      total_wrapped = total_wrapped + (t:get("wrapped") or 0)
      total_slice = total_slice + (t:get("slice") or 0)
      max_load = math.max(max_load, t:get("load_ms") or 0)
   end
   local e = summary.errors
   local non2xx = e.status
   local ok = summary.requests - non2xx
   local secs = summary.duration / 1e6
   if total_exhausted > 0 then
      io.stderr:write(string.format(
         "wrk-events: WARNING: the event file ran out; %d requests went to a 404 path " ..
         "instead (counted as non-2xx). Generate more events.\n", total_exhausted))
   end
   if total_wrapped > 0 then
      io.stderr:write(string.format(
         "wrk-events: WARNING: slices wrapped %d times; events were sent more than once " ..
         "(fine only for a receiver that does not deduplicate).\n", total_wrapped))
   end
   io.write(string.format(
      "wrk-events: RESULT requests=%d ok=%d non2xx=%d connect_err=%d read_err=%d " ..
      "write_err=%d timeouts=%d duration_s=%.3f ok_per_s=%.1f p50_ms=%.3f p90_ms=%.3f " ..
      "p99_ms=%.3f max_ms=%.3f issued=%d events_loaded=%d exhausted=%d wrapped=%d " ..
      "max_load_ms=%.0f\n",
      summary.requests, ok, non2xx, e.connect, e.read, e.write, e.timeout, secs,
      ok / secs, latency:percentile(50) / 1000, latency:percentile(90) / 1000,
      latency:percentile(99) / 1000, latency.max / 1000, total_issued, total_slice,
      total_exhausted, total_wrapped, max_load))
end
