package vastai

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// market is the simulator's fixed set of asks (Vast.ai's offers), each
// with the fields of vast.py's search offers that the driver filters on
// or reads. They cover datacenter and community hosts, asks with and
// without a min_bid (bid instances), and hosts that dstack's filters
// exclude (low reliability, old CUDA).
var market = []map[string]any{
	ask(4090001, "RTX 4090", 1, 24564, 32, 8, 128000, 200, 0.40, 0.22, "Quebec, CA", true, 0.995, 12.8, 890, 310),
	ask(4090002, "RTX 4090", 2, 24564, 64, 32, 256000, 500, 0.75, 0.41, "Ontario, CA", false, 0.97, 12.9, 890, 295),
	ask(3090001, "RTX 3090", 1, 24576, 16, 8, 64000, 100, 0.20, 0.11, "Bavaria, DE", false, 0.95, 12.8, 860, 250),
	ask(1000001, "A100 SXM4", 2, 81920, 128, 32, 512000, 1000, 2.60, 0, "Texas, US", true, 0.999, 12.8, 800, 400),
	ask(1000002, "H100 SXM", 8, 81559, 224, 224, 2048000, 2000, 19.20, 0, "Oregon, US", true, 0.999, 13.0, 900, 420),
	ask(5000001, "RTX A5000", 1, 24564, 24, 6, 96000, 80, 0.18, 0.09, "Ontario, CA", true, 0.80, 12.8, 860, 120), // unreliable
	ask(1001001, "Tesla V100", 1, 16384, 16, 8, 64000, 80, 0.15, 0.07, "Texas, US", true, 0.99, 11.8, 700, 100),  // old CUDA
}

// ask returns one ask; minBid 0 means none (no bid instances).
func ask(id int64, gpu string, gpus int, gpuRAM float64, cores, eff, ram, disk, dph, minBid float64,
	geo string, datacenter bool, reliability, cuda float64, computeCap, score int) map[string]any {
	a := map[string]any{
		"id": id, "ask_contract_id": id, "bundle_id": id, "machine_id": id / 10, "host_id": id / 1000,
		"gpu_name": gpu, "num_gpus": gpus, "gpu_ram": gpuRAM, "gpu_total_ram": gpuRAM * float64(gpus),
		"cpu_cores": cores, "cpu_cores_effective": eff, "cpu_ram": ram, "cpu_name": "AMD EPYC 7543",
		"disk_space": disk, "dph_base": dph * 0.95, "dph_total": dph, "storage_cost": 0.1,
		"geolocation": geo, "datacenter": datacenter, "hosting_type": map[bool]int{true: 1, false: 0}[datacenter],
		"reliability2": reliability, "reliability": reliability, "verified": true, "verification": "verified",
		"rentable": true, "rented": false, "direct_port_count": 32, "inet_down": 900.0, "inet_up": 800.0,
		"cuda_max_good": cuda, "compute_cap": computeCap, "score": float64(score), "external": false,
		"static_ip": true, "min_bid": nil,
	}
	if minBid > 0 {
		a["min_bid"] = minBid
	}
	return a
}

// findAsk returns the ask with id.
func findAsk(id string) (map[string]any, bool) {
	for _, a := range market {
		if fmt.Sprint(a["id"]) == id {
			return a, true
		}
	}
	return nil, false
}

// search answers a bundles query: every field condition {op: value} holds
// (eq, neq, gt, gte, lt, lte, in, notin); order [[field, asc|desc], ...];
// limit. A field no ask has, or an operator Vast.ai does not know, is an
// error, so that a driver's typo shows.
func search(query map[string]any) ([]map[string]any, error) {
	var order [][]any
	limit := 64 // vast.py's search offers default
	conds := map[string]map[string]any{}
	for k, v := range query {
		switch k {
		case "order":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("order: want a list of [field, direction]")
			}
			for _, o := range list {
				pair, ok := o.([]any)
				if !ok || len(pair) == 0 {
					return nil, fmt.Errorf("order: want a list of [field, direction]")
				}
				order = append(order, pair)
			}
		case "limit":
			n, ok := v.(float64)
			if !ok || n < 1 {
				return nil, fmt.Errorf("limit: want a positive number")
			}
			limit = int(n)
		case "type", "allocated_storage", "disable_bundling":
			// Search options the simulator ignores.
		default:
			if _, ok := market[0][k]; !ok {
				return nil, fmt.Errorf("unknown field %q", k)
			}
			c, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: want {operator: value}", k)
			}
			conds[k] = c
		}
	}
	var out []map[string]any
	for _, a := range market {
		ok := true
		for field, c := range conds {
			for op, want := range c {
				match, err := holds(a[field], op, want)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", field, err)
				}
				ok = ok && match
			}
		}
		if ok {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(x, y map[string]any) int {
		for _, o := range order {
			field := fmt.Sprint(o[0])
			c := compare(x[field], y[field])
			if len(o) > 1 && o[1] == "desc" {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// holds evaluates have op want.
func holds(have any, op string, want any) (bool, error) {
	switch op {
	case "eq":
		return compare(have, want) == 0 && have != nil == (want != nil), nil
	case "neq":
		return compare(have, want) != 0 || (have == nil) != (want == nil), nil
	case "gt", "gte", "lt", "lte":
		if have == nil {
			return false, nil
		}
		if _, ok := number(want); !ok {
			return false, fmt.Errorf("%s: want a number, got %v", op, want)
		}
		c := compare(have, want)
		return map[string]bool{"gt": c > 0, "gte": c >= 0, "lt": c < 0, "lte": c <= 0}[op], nil
	case "in", "notin":
		list, ok := want.([]any)
		if !ok {
			return false, fmt.Errorf("%s: want a list", op)
		}
		in := slices.ContainsFunc(list, func(w any) bool { return compare(have, w) == 0 })
		return in == (op == "in"), nil
	}
	return false, fmt.Errorf("unknown operator %q", op)
}

// number reads a JSON number (or a Go one of the market).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil
	}
	return 0, false
}

// compare orders two values: numbers numerically, booleans false first,
// anything else as text.
func compare(a, b any) int {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			return cmp.Compare(x, y)
		}
	}
	if x, ok := a.(bool); ok {
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}
