-- mrc.lua: Wireshark dissector for the MRC transport of mrc-testbed, and a postdissector
-- that reads an SRv6 uSID IPv6 address as the path it is.
--
--   wireshark -X lua_script:tools/wireshark/mrc.lua results/<run>/pcap/h0-eth0.pcap
--   tshark -X lua_script:tools/wireshark/mrc.lua -o usid.topology:results/<run>/topology.json -r f.pcap
--
-- Protocol "mrc" (UDP port 4793): the 32-byte MRC header and the 24-byte control body
-- of SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS and CNP, every field, as docs/protocol.md
-- defines them, and the traffic class the packet's IPv6 DSCP names. A DATA packet in a
-- trimmed class (a switch cut it and rewrote its DSCP) is shown as trimmed, and where:
-- payload_len says what the sender put behind the header, and the receiver takes none.
--
-- Protocol "usid" (a postdissector): an IPv6 address inside the locator block
-- fcbb:bb00::/32 is the block followed by up to six 16-bit uSIDs, one per node on the
-- way (docs/addressing.md). Each uSID is named by the resolved topology of the run
-- (the topology.json in its results folder: the preference usid.topology, else the
-- environment variable MRC_TOPOLOGY_JSON), or, with no file, by the addressing rule.
-- The same file gives mrc the DSCP of each traffic class, when it names them.
--
-- Wireshark's Lua cannot import the project's Python, so the facts below repeat
-- hosts/protocol.py and topologies/addressing.py; tests/unit/test_dissector.py decodes
-- packets built by the project's own scapy layer to check that they agree.
-- Written for Lua 5.2 to 5.4 (Wireshark 3.6 and later): no bitwise operators.

-------------------------------------------------------------------------- MRC facts
local MRC_UDP_PORT = 4793
local HEADER_BYTES = 32
local CONTROL_BODY_BYTES = 24
local DATA = 1
local NACK = 3

local TYPE_NAMES = { [1] = "DATA", [2] = "SACK", [3] = "NACK", [4] = "PROBE",
                     [5] = "PROBE_REPLY", [6] = "PLANE_STATUS", [7] = "CNP" }
-- Bits 0x01 and 0x02 are reserved: no switch writes into this header.
local FLAG_BITS = { { 0x04, "ECN_ECHO" }, { 0x08, "LAST" }, { 0x10, "RETRANSMIT" },
                    { 0x20, "ALWAYS_SKIP" } }
local REASON_NAMES = { [0] = "none", [1] = "TRIMMED", [2] = "TRIMMED_LASTHOP", [3] = "GAP" }

-- Traffic classes: a switch knows a packet by the DSCP of its IPv6 traffic class alone,
-- and says it trimmed one by rewriting that DSCP to TRIMMED (on a fabric port) or
-- TRIMMED_LASTHOP (on a port facing a host); the bytes it kept are left as they were.
-- The code points are the operator's: the topology.json of the run, when it names them
-- (spec.traffic_classes), else these defaults. Indexed by class id.
local CLASS_NAMES = { [0] = "control", [1] = "trimmable", [2] = "trimmable_retx",
                      [3] = "no_trim", [4] = "trimmed", [5] = "trimmed_lasthop",
                      [6] = "roce", [7] = "roce_cnp" }
local DEFAULT_DSCP = { [0] = 46, [1] = 10, [2] = 12, [3] = 0, [4] = 51, [5] = 55,
                       [6] = 26, [7] = 48 }
local TRIMMED = 4
local TRIMMED_LASTHOP = 5
local MAX_DSCP = 63
-- Where a switch trimmed a packet of each trimmed class.
local TRIMMED_WHERE = { [TRIMMED] = "fabric", [TRIMMED_LASTHOP] = "last hop" }

-- Arithmetic stand-ins for bit operations (Lua 5.2 has none built in that 5.4 keeps).
local function has_bit(value, bit) return math.floor(value / bit) % 2 == 1 end
local function shift_right(value, bits) return math.floor(value / 2 ^ bits) end

-------------------------------------------------------------------------- addressing facts
local LOCATOR_BLOCK = 0xFCBBBB00 -- fcbb:bb00::/32
local MAX_USIDS = 6
local HOST_BASE = 0x8000

-- The addressing rule of topologies/addressing.py: role nibble, plane nibble, low byte.
local function rule_name(usid)
  if usid >= HOST_BASE then
    local index = usid - HOST_BASE
    return "h" .. index, "host " .. index
  end
  local role, plane, low = shift_right(usid, 12), shift_right(usid, 8) % 16, usid % 256
  if role == 1 then return string.format("p%dt0r%d", plane, low),
                           string.format("T0 plane %d rack %d", plane, low) end
  if role == 2 then return string.format("p%dt1s%d", plane, low),
                           string.format("T1 plane %d spine %d", plane, low) end
  return string.format("0x%04x", usid), "unassigned uSID"
end

-------------------------------------------------------------------------- a small JSON reader
-- Enough JSON for topology.json (objects, arrays, strings, numbers, true, false, null);
-- errors name the byte where the text stops making sense.
local function json_decode(text)
  local pos = 1
  local function fail(what) error(string.format("%s at byte %d", what, pos), 0) end
  local function skip() pos = text:find("[^ \t\r\n]", pos) or (#text + 1) end
  local function peek() return text:sub(pos, pos) end
  local escapes = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f",
                    n = "\n", r = "\r", t = "\t" }
  local value

  local function str()
    pos = pos + 1
    local parts = {}
    while true do
      local c = peek()
      if c == "" then fail("unterminated string") end
      if c == '"' then
        pos = pos + 1
        return table.concat(parts)
      elseif c == "\\" then
        local esc = text:sub(pos + 1, pos + 1)
        if esc == "u" then
          local hex = text:sub(pos + 2, pos + 5)
          if not hex:match("^%x%x%x%x$") then fail("bad \\u escape") end
          local code = tonumber(hex, 16)
          parts[#parts + 1] = code < 128 and string.char(code) or "?"
          pos = pos + 6
        elseif escapes[esc] then
          parts[#parts + 1] = escapes[esc]
          pos = pos + 2
        else
          fail("bad escape")
        end
      else
        local stop = text:find('["\\]', pos) or (#text + 1)
        parts[#parts + 1] = text:sub(pos, stop - 1)
        pos = stop
      end
    end
  end

  local function container(close, is_object)
    pos = pos + 1
    local result, n = {}, 0
    skip()
    if peek() == close then
      pos = pos + 1
      return result
    end
    while true do
      skip()
      if is_object then
        if peek() ~= '"' then fail("expected a key") end
        local key = str()
        skip()
        if peek() ~= ":" then fail("expected ':'") end
        pos = pos + 1
        result[key] = value()
      else
        n = n + 1
        result[n] = value()
      end
      skip()
      local c = peek()
      pos = pos + 1
      if c == close then return result end
      if c ~= "," then fail("expected ',' or '" .. close .. "'") end
    end
  end

  function value()
    skip()
    local c = peek()
    if c == "{" then return container("}", true) end
    if c == "[" then return container("]", false) end
    if c == '"' then return str() end
    for word, v in pairs({ ["true"] = true, ["false"] = false, null = false }) do
      if text:sub(pos, pos + #word - 1) == word then
        pos = pos + #word
        if word == "null" then return nil end
        return v
      end
    end
    local s, stop = text:find("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if not s then fail("unexpected character '" .. c .. "'") end
    pos = stop + 1
    return tonumber(text:sub(s, stop)) or fail("bad number")
  end

  local result = value()
  skip()
  if pos <= #text then fail("text after the end") end
  return result
end

-------------------------------------------------------------------------- the run's topology.json
-- Both protocols read the resolved topology of the run: usid names each uSID's node from
-- its "nodes", mrc takes the DSCP of each traffic class from its "spec" (an operator may
-- give the classes other code points than the defaults). The preference that names the
-- file belongs to usid, which had it first.
local usid = Proto("usid", "SRv6 uSID path (mrc-testbed)")
usid.prefs.topology = Pref.string("Resolved topology (topology.json)", "",
  "The topology.json of the run the capture comes from, to name each uSID's node and "
  .. "to know the DSCP of each traffic class. Empty: the environment variable "
  .. "MRC_TOPOLOGY_JSON, else the addressing rule and the default DSCPs.")

-- DSCP -> class id, for code points indexed by class id.
local function classes_by_dscp(dscp)
  local class_of = {}
  for id, code in pairs(dscp) do class_of[code] = id end
  return class_of
end

local DEFAULT_CLASSES = classes_by_dscp(DEFAULT_DSCP)
local DEFAULT_CLASSES_FROM = "the defaults (no topology.json names them)"

-- The loaded topology: which file, its uSID -> node name map and DSCP -> class map, or
-- why it failed.
local topo = { path = nil, names = nil, label = nil, problem = nil,
               class_of = DEFAULT_CLASSES, classes_from = DEFAULT_CLASSES_FROM }

local function topology_path()
  local pref = usid.prefs.topology
  if pref and pref ~= "" then return pref end
  local env = os.getenv("MRC_TOPOLOGY_JSON")
  if env and env ~= "" then return env end
  return nil
end

-- spec.traffic_classes ({"control": 46, ...}) as DSCPs by class id; a class the file
-- does not name keeps its default, as topologies/model.py reads a topology. Nil when
-- the file names none (a topology.json written before it carried them).
local function read_traffic_classes(spec)
  if type(spec) ~= "table" or spec.traffic_classes == nil then return nil end
  if type(spec.traffic_classes) ~= "table" then
    error("spec.traffic_classes is not an object", 0)
  end
  local ids, dscp = {}, {}
  for id, name in pairs(CLASS_NAMES) do ids[name] = id end
  for id, code in pairs(DEFAULT_DSCP) do dscp[id] = code end
  for name, code in pairs(spec.traffic_classes) do
    local id = ids[name]
    if id == nil then error("spec.traffic_classes: unknown class " .. tostring(name), 0) end
    if type(code) ~= "number" or code < 0 or code > MAX_DSCP or code % 1 ~= 0 then
      error(string.format("spec.traffic_classes.%s: %s is not a DSCP (0 to %d)", name,
                          tostring(code), MAX_DSCP), 0)
    end
    dscp[id] = code
  end
  return dscp
end

local function load_topology(path)
  local file, why = io.open(path, "r")
  if not file then error("cannot open: " .. tostring(why), 0) end
  local text = file:read("*a")
  file:close()
  local ok, doc = pcall(json_decode, text)
  if not ok then error("not JSON: " .. doc, 0) end
  if type(doc) ~= "table" or type(doc.nodes) ~= "table" then
    error("no \"nodes\" object (is it the topology.json of a results folder?)", 0)
  end
  local names = {}
  for name, node in pairs(doc.nodes) do
    local number = type(node) == "table" and tonumber(tostring(node.usid))
    if not number then error("node " .. name .. ": no uSID", 0) end
    names[number] = name
  end
  return { names = names, label = tostring(doc.topology or "?"),
           dscp = read_traffic_classes(doc.spec) }
end

-- Reload when the preference or the environment names another file.
local function current_topology()
  local path = topology_path()
  if path ~= topo.path then
    topo = { path = path, class_of = DEFAULT_CLASSES, classes_from = DEFAULT_CLASSES_FROM }
    if path then
      local ok, loaded = pcall(load_topology, path)
      if ok then
        topo.names, topo.label = loaded.names, loaded.label
        if loaded.dscp then
          topo.class_of = classes_by_dscp(loaded.dscp)
          topo.classes_from = "topology.json of " .. loaded.label .. " (" .. path .. ")"
        else
          topo.classes_from = "the defaults (topology.json of " .. loaded.label
                              .. " names none)"
        end
      else
        topo.problem = path .. ": " .. loaded
        topo.classes_from = "the defaults (topology.json not used: " .. loaded .. ")"
      end
    end
  end
  return topo
end

function usid.prefs_changed()
  topo = { path = false } -- not a path: the next packet reloads
end

-------------------------------------------------------------------------- MRC protocol
local mrc = Proto("mrc", "MRC transport (mrc-testbed)")

local f = {
  version = ProtoField.uint8("mrc.version", "Version", base.DEC, nil, 0xF0),
  type = ProtoField.uint8("mrc.type", "Type", base.DEC, TYPE_NAMES, 0x0F),
  flags = ProtoField.uint8("mrc.flags", "Flags", base.HEX),
  ecn_echo = ProtoField.bool("mrc.flags.ecn_echo", "ECN_ECHO: the acknowledged packet was CE",
                             8, nil, 0x04),
  last = ProtoField.bool("mrc.flags.last", "LAST: last packet of its message", 8, nil, 0x08),
  retransmit = ProtoField.bool("mrc.flags.retransmit", "RETRANSMIT", 8, nil, 0x10),
  always_skip = ProtoField.bool("mrc.flags.always_skip",
                                "ALWAYS_SKIP: the receiver judges the echoed EV persistently bad",
                                8, nil, 0x20),
  plane = ProtoField.uint8("mrc.plane", "Plane", base.DEC),
  reason = ProtoField.uint8("mrc.reason", "NACK reason", base.DEC, REASON_NAMES),
  conn_id = ProtoField.uint32("mrc.conn_id", "Connection", base.HEX),
  conn_sender = ProtoField.uint32("mrc.conn_id.sender", "Data sender (host index)",
                                  base.DEC, nil, 0xFFFF0000),
  conn_receiver = ProtoField.uint32("mrc.conn_id.receiver", "Data receiver (host index)",
                                    base.DEC, nil, 0x0000FFFF),
  ev = ProtoField.uint32("mrc.ev", "Entropy value (EV)", base.HEX),
  ev_plane = ProtoField.uint32("mrc.ev.plane", "EV plane", base.DEC, nil, 0xFF000000),
  ev_choice = ProtoField.uint32("mrc.ev.choice", "EV choice within the plane", base.DEC,
                                nil, 0x00FFFFFF),
  msg_id = ProtoField.uint32("mrc.msg_id", "Message id", base.DEC),
  psn = ProtoField.uint32("mrc.psn", "PSN", base.DEC),
  offset = ProtoField.uint32("mrc.offset", "Offset in the message", base.DEC),
  msg_len = ProtoField.uint32("mrc.msg_len", "Message length", base.DEC),
  payload_len = ProtoField.uint16("mrc.payload_len", "Payload length (as sent)", base.DEC),
  path_seq = ProtoField.uint16("mrc.path_seq", "Path and sequence number on it (DATA)",
                               base.HEX),
  path_seq_path = ProtoField.uint16("mrc.path_seq.path", "Path index within the plane",
                                    base.DEC, nil, 0xFF00),
  path_seq_seq = ProtoField.uint16("mrc.path_seq.seq", "Sequence number on the path",
                                   base.DEC, nil, 0x00FF),
  payload_present = ProtoField.uint32("mrc.payload_present", "Payload bytes present",
                                      base.DEC),
  trimmed_bytes = ProtoField.uint32("mrc.trimmed_bytes", "Payload bytes cut by a switch",
                                    base.DEC),
  payload = ProtoField.bytes("mrc.payload", "Payload"),
  trimmed_kept = ProtoField.bytes("mrc.trimmed_kept",
                                  "Payload bytes the trim kept (not delivered)"),
  dscp = ProtoField.uint8("mrc.dscp", "DSCP (IPv6 traffic class)", base.DEC),
  class = ProtoField.string("mrc.class", "Traffic class"),
  class_from = ProtoField.string("mrc.class.from", "DSCPs of the classes from"),
  trimmed = ProtoField.string("mrc.trimmed", "Trimmed by a switch (where)"),
  cum_psn = ProtoField.uint32("mrc.cum_psn", "Cumulative PSN (all below arrived)", base.DEC),
  sack_base = ProtoField.uint32("mrc.sack_base", "SACK base (PSN of bitmap bit 0)", base.DEC),
  bitmap = ProtoField.uint64("mrc.bitmap", "SACK bitmap", base.HEX),
  bitmap_count = ProtoField.uint32("mrc.bitmap_count", "PSNs the bitmap marks arrived",
                                   base.DEC),
  echo_ev = ProtoField.uint32("mrc.echo_ev", "Echoed EV", base.HEX),
  ecn_marks = ProtoField.uint16("mrc.ecn_marks", "CE-marked packets since the last SACK",
                                base.DEC),
  port_state = ProtoField.uint16("mrc.port_state", "Port state (planes up)", base.HEX),
  planes_up = ProtoField.string("mrc.planes_up", "Planes up"),
}
mrc.fields = f

local e = {
  trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed DATA: no payload",
                            expert.group.SEQUENCE, expert.severity.NOTE),
  malformed = ProtoExpert.new("mrc.expert.malformed", "Malformed MRC packet",
                              expert.group.MALFORMED, expert.severity.WARN),
  snapped = ProtoExpert.new("mrc.expert.snapped", "Capture snap length cut the packet",
                            expert.group.UNDECODED, expert.severity.CHAT),
}
mrc.experts = e

local ipv6_dscp = Field.new("ipv6.tclass.dscp")

-- The DSCP of the IPv6 header that carries this packet: the last one dissected so far
-- (an ICMPv6 error quoting an MRC packet holds two). Nil over anything but IPv6.
local function carrier_dscp()
  local all = { ipv6_dscp() }
  local last = all[#all]
  return last and last.value
end

-- The packet's traffic class from its DSCP: adds the class fields, returns the class id
-- (nil for a DSCP no class has, which a switch treats as best effort).
local function add_class(t)
  local dscp = carrier_dscp()
  if dscp == nil then return nil end
  local topology = current_topology()
  local class = topology.class_of[dscp]
  t:add(f.dscp, dscp):set_generated()
  local item = t:add(f.class, class and CLASS_NAMES[class] or "unnamed")
  item:set_generated()
  item:add(f.class_from, topology.classes_from):set_generated()
  return class
end

local function flag_names(flags)
  local names = {}
  for _, pair in ipairs(FLAG_BITS) do
    if has_bit(flags, pair[1]) then names[#names + 1] = pair[2] end
  end
  return names
end

local function count_bits(value)
  local n = 0
  while value > 0 do
    n = n + value % 2
    value = math.floor(value / 2)
  end
  return n
end

local function dissect_control(tvb, tree)
  local body = tree:add(mrc, tvb(HEADER_BYTES, CONTROL_BODY_BYTES), "Control body")
  local c = HEADER_BYTES
  body:add(f.cum_psn, tvb(c, 4))
  body:add(f.sack_base, tvb(c + 4, 4))
  local bitmap = body:add(f.bitmap, tvb(c + 8, 8))
  bitmap:add(f.bitmap_count, tvb(c + 8, 8),
             count_bits(tvb(c + 8, 4):uint()) + count_bits(tvb(c + 12, 4):uint()))
         :set_generated()
  body:add(f.echo_ev, tvb(c + 16, 4))
  body:add(f.ecn_marks, tvb(c + 20, 2))
  local state = tvb(c + 22, 2):uint()
  local ports = body:add(f.port_state, tvb(c + 22, 2))
  local up = {}
  for plane = 0, 15 do
    if has_bit(state, 2 ^ plane) then up[#up + 1] = tostring(plane) end
  end
  ports:add(f.planes_up, tvb(c + 22, 2), #up > 0 and table.concat(up, ",") or "none")
       :set_generated()
  return tvb(c, 4):uint()
end

function mrc.dissector(tvb, pinfo, tree)
  -- reported_len: the packet's length on the wire, whatever the capture's snap length.
  local wire_len = tvb:reported_len()
  if wire_len < HEADER_BYTES or tvb:len() < HEADER_BYTES then return 0 end
  pinfo.cols.protocol = "MRC"
  local t = tree:add(mrc, tvb(0, math.min(tvb:len(), wire_len)))

  local vt = tvb(0, 1):uint()
  local version, kind = shift_right(vt, 4), vt % 16
  local flags = tvb(1, 1):uint()
  t:add(f.version, tvb(0, 1))
  t:add(f.type, tvb(0, 1))
  local names = flag_names(flags)
  local flag_item = t:add(f.flags, tvb(1, 1))
  flag_item:append_text(#names > 0 and " (" .. table.concat(names, ", ") .. ")" or "")
  for _, field in ipairs({ f.ecn_echo, f.last, f.retransmit, f.always_skip }) do
    flag_item:add(field, tvb(1, 1))
  end
  t:add(f.plane, tvb(2, 1))
  t:add(f.reason, tvb(3, 1))
  local conn = t:add(f.conn_id, tvb(4, 4))
  conn:add(f.conn_sender, tvb(4, 4))
  conn:add(f.conn_receiver, tvb(4, 4))
  local ev = t:add(f.ev, tvb(8, 4))
  ev:add(f.ev_plane, tvb(8, 4))
  ev:add(f.ev_choice, tvb(8, 4))
  t:add(f.msg_id, tvb(12, 4))
  t:add(f.psn, tvb(16, 4))
  t:add(f.offset, tvb(20, 4))
  t:add(f.msg_len, tvb(24, 4))
  local payload_len = tvb(28, 2):uint()
  local len_item = t:add(f.payload_len, tvb(28, 2))
  local path_seq = t:add(f.path_seq, tvb(30, 2))
  if kind == DATA then
    path_seq:add(f.path_seq_path, tvb(30, 2))
    path_seq:add(f.path_seq_seq, tvb(30, 2))
  end

  local name = TYPE_NAMES[kind] or ("type " .. kind)
  local psn = tvb(16, 4):uint()
  local info = string.format("%s psn=%d ev=0x%08x", name, psn, tvb(8, 4):uint())
  if version ~= 1 then
    t:add_proto_expert_info(e.malformed, "version " .. version .. ", expected 1")
  end

  -- Trimmed is what the DSCP says, never a short packet alone: a switch cut it to its
  -- trim size (the header, and perhaps the payload's first bytes, untouched), and the
  -- receiver takes no payload from it.
  local class = add_class(t)
  local where = class and TRIMMED_WHERE[class]
  local present = wire_len - HEADER_BYTES
  if kind == DATA then
    info = info .. string.format(" off=%d len=%d", tvb(20, 4):uint(), payload_len)
    len_item:add(f.payload_present, tvb(28, 2), present):set_generated()
    if where then
      t:add(f.trimmed, where):set_generated()
      if present <= payload_len then
        len_item:add(f.trimmed_bytes, tvb(28, 2), payload_len - present):set_generated()
        t:add_proto_expert_info(e.trimmed, string.format(
          "Trimmed DATA (%s): payload_len %d, %d bytes present, %d cut by a switch",
          where, payload_len, present, payload_len - present))
        info = info .. " (trimmed, " .. where .. ")"
      else
        t:add_proto_expert_info(e.malformed, string.format(
          "trimmed DATA with %d payload bytes, more than its payload_len %d", present,
          payload_len))
      end
    elseif present ~= payload_len then
      t:add_proto_expert_info(e.malformed, string.format(
        "payload_len %d but %d bytes present", payload_len, present))
    end
    if present > 0 then
      local captured = tvb:len() - HEADER_BYTES
      if captured > 0 then
        t:add(where and f.trimmed_kept or f.payload, tvb(HEADER_BYTES, captured))
      end
      if captured < present then
        t:add_proto_expert_info(e.snapped, string.format(
          "%d of %d payload bytes captured", math.max(captured, 0), present))
      end
    end
  elseif TYPE_NAMES[kind] then
    if where then
      t:add_proto_expert_info(e.malformed, string.format(
        "%s in the class %s: switches trim only DATA", name, CLASS_NAMES[class]))
    end
    if present ~= CONTROL_BODY_BYTES then
      t:add_proto_expert_info(e.malformed, string.format(
        "%s must carry a %d-byte control body, has %d bytes", name, CONTROL_BODY_BYTES,
        present))
    end
    if tvb:len() >= HEADER_BYTES + CONTROL_BODY_BYTES then
      info = info .. string.format(" cum=%d", dissect_control(tvb, t))
    end
    if kind == NACK then info = info .. " reason=" .. (REASON_NAMES[tvb(3, 1):uint()] or "?") end
  else
    t:add_proto_expert_info(e.malformed, "unknown packet type " .. kind)
  end
  if #names > 0 then info = info .. " [" .. table.concat(names, ",") .. "]" end
  pinfo.cols.info = info
  return tvb:len()
end

DissectorTable.get("udp.port"):add(MRC_UDP_PORT, mrc)

-------------------------------------------------------------------------- uSID postdissector
local u = {
  address = ProtoField.string("usid.address", "uSID address"),
  block = ProtoField.uint32("usid.block", "Locator block", base.HEX),
  sid = ProtoField.uint16("usid.sid", "uSID", base.HEX),
  node = ProtoField.string("usid.node", "Node"),
  active = ProtoField.string("usid.active", "Active node (next to act)"),
  path = ProtoField.string("usid.path", "Path"),
  src_node = ProtoField.string("usid.src_node", "Source node"),
  names = ProtoField.string("usid.names", "Names from"),
}
usid.fields = u

local ue = {
  topology = ProtoExpert.new("usid.expert.topology", "topology.json not used",
                             expert.group.PROTOCOL, expert.severity.WARN),
  unknown = ProtoExpert.new("usid.expert.unknown", "uSID not in the topology",
                            expert.group.SEQUENCE, expert.severity.WARN),
}
usid.experts = ue

local ipv6_dst = Field.new("ipv6.dst")
local ipv6_src = Field.new("ipv6.src")

-- The uSIDs of an address inside the block (trailing zero uSIDs dropped), or nil.
local function split(range)
  if range:len() ~= 16 or range:range(0, 4):uint() ~= LOCATOR_BLOCK then return nil end
  local list = {}
  for i = 0, MAX_USIDS - 1 do list[i + 1] = range:range(4 + 2 * i, 2):uint() end
  while #list > 0 and list[#list] == 0 do list[#list] = nil end
  return list
end

local function node_name(sid, t)
  local name, role = rule_name(sid)
  if t.names then
    if t.names[sid] then return t.names[sid], role, true end
    return name, role, false
  end
  return name, role, true
end

function usid.dissector(tvb, pinfo, tree)
  local dst = ipv6_dst()
  if not dst then return end
  local list = split(dst.range)
  if not list or #list == 0 then return end
  local t = current_topology()
  local sub = tree:add(usid, dst.range, "SRv6 uSID path")
  sub:add(u.address, dst.range, tostring(dst.value))
  sub:add(u.block, dst.range:range(0, 4))
  local path = {}
  for i, sid in ipairs(list) do
    local name, role, known = node_name(sid, t)
    path[#path + 1] = name
    local item = sub:add(u.sid, dst.range:range(2 + 2 * i, 2))
    item:append_text(string.format(" %s (%s)%s", name, role, i == 1 and ", active" or ""))
    item:add(u.node, dst.range:range(2 + 2 * i, 2), name)
    if not known then
      item:add_proto_expert_info(ue.unknown, string.format(
        "uSID 0x%04x is not a node of %s (named by the addressing rule)", sid, t.label))
    end
  end
  sub:add(u.active, dst.range:range(4, 2), path[1])
  sub:add(u.path, dst.range, table.concat(path, " > "))
  local src = ipv6_src()
  local src_list = src and split(src.range)
  if src_list and #src_list > 0 then
    sub:add(u.src_node, src.range, (node_name(src_list[1], t)))
  end
  if t.names then
    sub:add(u.names, dst.range, "topology.json of " .. t.label .. " (" .. t.path .. ")")
       :set_generated()
  else
    sub:add(u.names, dst.range, "the addressing rule"):set_generated()
    if t.problem then
      sub:add_proto_expert_info(ue.topology, t.problem .. "; names follow the addressing rule")
    end
  end
  sub:append_text(": " .. table.concat(path, " > "))
end

register_postdissector(usid)
