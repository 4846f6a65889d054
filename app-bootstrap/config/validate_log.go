package config

import (
	"strings"
)

func (v *errs) log(format, level string) Log {
	out := Log{}
	switch f := LogFormat(strings.ToLower(format)); f {
	case LogAuto, LogJSON, LogText:
		out.Format = f
	default:
		v.add(Prefix+"LOG_FORMAT", ErrUnsupported, "%q: want json, text or auto", bounded(format))
	}
	if err := out.Level.UnmarshalText([]byte(level)); err != nil {
		v.add(Prefix+"LOG_LEVEL", ErrInvalid, "%q: want debug, info, warn or error", bounded(level))
	}
	return out
}
