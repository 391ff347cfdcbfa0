-- mrc.lua: Wireshark dissector for the MRC transport of mrc-testbed, and a postdissector
-- that reads an SRv6 uSID IPv6 address as the path it is.
--
--   wireshark -X lua_script:tools/wireshark/mrc.lua results/<run>/pcap/h0-eth0.pcap
--   tshark -X lua_script:tools/wireshark/mrc.lua -o usid.topology:results/<run>/topology.json -r f.pcap
--
-- Protocol "mrc" (UDP port 4793): the 32-byte MRC header and the 24-byte control body
-- of SACK, NACK, PROBE, PROBE_REPLY, PLANE_STATUS and CNP, every field, as docs/protocol.md
-- defines them. A trimmed DATA packet (a switch cut its payload) is shown as such:
-- payload_len says what the sender put behind the header, the packet holds none.
--
-- Protocol "usid" (a postdissector): an IPv6 address inside the locator block
-- fcbb:bb00::/32 is the block followed by up to six 16-bit uSIDs, one per node on the
-- way (docs/addressing.md). Each uSID is named by the resolved topology of the run
-- (the topology.json in its results folder: the preference usid.topology, else the
-- environment variable MRC_TOPOLOGY_JSON), or, with no file, by the addressing rule.
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
local F_TRIMMED = 0x01

local TYPE_NAMES = { [1] = "DATA", [2] = "SACK", [3] = "NACK", [4] = "PROBE",
                     [5] = "PROBE_REPLY", [6] = "PLANE_STATUS", [7] = "CNP" }
local FLAG_BITS = { { 0x01, "TRIMMED" }, { 0x02, "TRIMMED_LASTHOP" }, { 0x04, "ECN_ECHO" },
                    { 0x08, "LAST" }, { 0x10, "RETRANSMIT" }, { 0x20, "ALWAYS_SKIP" } }
local REASON_NAMES = { [0] = "none", [1] = "TRIMMED", [2] = "TRIMMED_LASTHOP", [3] = "GAP" }

-- Arithmetic stand-ins for bit operations (Lua 5.2 has none built in that 5.4 keeps).
local function has_bit(value, bit) return math.floor(value / bit) % 2 == 1 end
local function shift_right(value, bits) return math.floor(value / 2 ^ bits) end

-------------------------------------------------------------------------- MRC protocol
local mrc = Proto("mrc", "MRC transport (mrc-testbed)")

local f = {
  version = ProtoField.uint8("mrc.version", "Version", base.DEC, nil, 0xF0),
  type = ProtoField.uint8("mrc.type", "Type", base.DEC, TYPE_NAMES, 0x0F),
  flags = ProtoField.uint8("mrc.flags", "Flags", base.HEX),
  trimmed = ProtoField.bool("mrc.flags.trimmed", "TRIMMED: a switch cut the payload", 8,
                            nil, 0x01),
  trimmed_lasthop = ProtoField.bool("mrc.flags.trimmed_lasthop",
                                    "TRIMMED_LASTHOP: cut on the port facing the receiver",
                                    8, nil, 0x02),
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
  trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed DATA: header only",
                            expert.group.SEQUENCE, expert.severity.NOTE),
  malformed = ProtoExpert.new("mrc.expert.malformed", "Malformed MRC packet",
                              expert.group.MALFORMED, expert.severity.WARN),
  snapped = ProtoExpert.new("mrc.expert.snapped", "Capture snap length cut the packet",
                            expert.group.UNDECODED, expert.severity.CHAT),
}
mrc.experts = e

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
  for _, field in ipairs({ f.trimmed, f.trimmed_lasthop, f.ecn_echo, f.last, f.retransmit,
                           f.always_skip }) do
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

  local present = wire_len - HEADER_BYTES
  if kind == DATA then
    info = info .. string.format(" off=%d len=%d", tvb(20, 4):uint(), payload_len)
    len_item:add(f.payload_present, tvb(28, 2), present):set_generated()
    if has_bit(flags, F_TRIMMED) then
      if present == 0 then
        len_item:add(f.trimmed_bytes, tvb(28, 2), payload_len):set_generated()
        t:add_proto_expert_info(e.trimmed, string.format(
          "Trimmed DATA: payload_len %d, 0 bytes present (a switch cut the payload)",
          payload_len))
        info = info .. " (trimmed)"
      else
        t:add_proto_expert_info(e.malformed, string.format(
          "TRIMMED set but %d payload bytes present", present))
      end
    elseif present ~= payload_len then
      t:add_proto_expert_info(e.malformed, string.format(
        "payload_len %d but %d bytes present", payload_len, present))
    end
    if present > 0 then
      local captured = tvb:len() - HEADER_BYTES
      if captured > 0 then t:add(f.payload, tvb(HEADER_BYTES, captured)) end
      if captured < present then
        t:add_proto_expert_info(e.snapped, string.format(
          "%d of %d payload bytes captured", math.max(captured, 0), present))
      end
    end
  elseif TYPE_NAMES[kind] then
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

-------------------------------------------------------------------------- uSID postdissector
local usid = Proto("usid", "SRv6 uSID path (mrc-testbed)")
usid.prefs.topology = Pref.string("Resolved topology (topology.json)", "",
  "The topology.json of the run the capture comes from, to name each uSID's node. "
  .. "Empty: the environment variable MRC_TOPOLOGY_JSON, else the addressing rule.")

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

-- The loaded topology: which file, its uSID -> node name map, or why it failed.
local topo = { path = nil, names = nil, label = nil, problem = nil }

local function topology_path()
  local pref = usid.prefs.topology
  if pref and pref ~= "" then return pref end
  local env = os.getenv("MRC_TOPOLOGY_JSON")
  if env and env ~= "" then return env end
  return nil
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
  return names, tostring(doc.topology or "?")
end

-- Reload when the preference or the environment names another file.
local function current_topology()
  local path = topology_path()
  if path ~= topo.path then
    topo = { path = path }
    if path then
      local ok, names, label = pcall(load_topology, path)
      if ok then
        topo.names, topo.label = names, label
      else
        topo.problem = path .. ": " .. names
      end
    end
  end
  return topo
end

function usid.prefs_changed()
  topo = { path = false } -- not a path: the next packet reloads
end

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
