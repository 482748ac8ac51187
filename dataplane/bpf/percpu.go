package bpf

import "reflect"

// SumPerCPU adds up the values a per-CPU map holds for one key, one per
// possible CPU, into dst: every uint64 field of the struct dst points to
// gets the sum of the field of the same name over per's elements (a
// generated struct of the object's BTF, such as TransitTransitStats).
// Fields of dst with no namesake in T stay as they are. The counters are
// read off the hot path (metrics, statistics), where reflection costs
// nothing that matters.
func SumPerCPU[T any](dst any, per []T) {
	d := reflect.ValueOf(dst).Elem()
	for i := range per {
		v := reflect.ValueOf(&per[i]).Elem()
		for f := 0; f < d.NumField(); f++ {
			df := d.Field(f)
			if df.Kind() != reflect.Uint64 || !df.CanSet() {
				continue
			}
			if sf := v.FieldByName(d.Type().Field(f).Name); sf.IsValid() && sf.Kind() == reflect.Uint64 {
				df.SetUint(df.Uint() + sf.Uint())
			}
		}
	}
}

// Sum adds up a per-CPU counter's values, one per possible CPU.
func Sum(per []uint64) uint64 {
	var s uint64
	for _, v := range per {
		s += v
	}
	return s
}
