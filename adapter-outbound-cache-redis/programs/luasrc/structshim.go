package luasrc

// StructShim is a Lua chunk that defines a global struct.pack/struct.unpack
// for the big-endian unsigned formats the programs use ('>B', '>I2'..'>I7'),
// unpack with its optional start position,
// for a Lua runtime without Redis's struct library (miniredis, ADR 0010).
// Test harnesses prepend it to a program's body; the programs themselves
// never contain it, and on Redis the built-in library is used.
const StructShim = `local function __widths(f)
  assert(string.sub(f, 1, 1) == '>', 'struct shim: big endian only')
  local ws = {}
  for c, d in string.gmatch(string.sub(f, 2), '([BI])(%d*)') do
    if c == 'B' then ws[#ws + 1] = 1 else ws[#ws + 1] = tonumber(d) end
  end
  return ws
end
rawset(_G, 'struct', {
  pack = function(f, ...)
    local args, out = {...}, {}
    for i, w in ipairs(__widths(f)) do
      local v, b = args[i], {}
      assert(v >= 0 and v == math.floor(v) and v < 256 ^ w, 'struct shim: value out of range')
      for j = w, 1, -1 do
        b[j] = string.char(v % 256)
        v = math.floor(v / 256)
      end
      out[#out + 1] = table.concat(b)
    end
    return table.concat(out)
  end,
  unpack = function(f, s, init)
    local res, pos = {}, init or 1
    for i, w in ipairs(__widths(f)) do
      assert(pos + w - 1 <= #s, 'struct shim: data string too short')
      local v = 0
      for j = pos, pos + w - 1 do v = v * 256 + string.byte(s, j) end
      res[i], pos = v, pos + w
    end
    res[#res + 1] = pos
    return unpack(res)
  end,
})
`
