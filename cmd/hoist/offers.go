package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"hoist/backends"
	"hoist/backends/local"
	"hoist/backends/offers"
	"hoist/backends/offers/query"
)

// defaultOfferLimit matches dstack's default number of offers shown.
const defaultOfferLimit = 50

func newOffersCmd() *cobra.Command {
	var (
		f          query.Filters
		catalogDir string
		catalogURL string
		groupBy    string
		output     string
		exportDir  string
		thisHost   bool
		serverCfg  string
		onDemand   bool
		spotAuto   bool
	)
	cmd := &cobra.Command{
		Use:   "offers",
		Short: "List cloud GPU/CPU offers matching resource requirements, cheapest first",
		Long: "List offers from the offer catalog (the snapshot built into hoist, a --catalog-dir of\n" +
			"gpuhunt PROVIDER.csv files, or gpuhunt's published layout at --catalog-url), strictly\n" +
			"cheapest first. Requirements use dstack's resources grammar, e.g. --gpu A100:80GB:8,\n" +
			"--gpu 24GB..:2, --gpu nvidia:1..8, --gpu 0 (CPU-only), --cpu arm:8.., --memory 64GB...\n" +
			"Only on-demand offers are listed unless --spot or --spot-policy auto is given.\n" +
			"Prices come from a catalog snapshot whose date is printed; they are not live quotes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("invalid --output %q: must be text or json", output)
			}
			keys, err := offers.ParseGroupBy(groupBy)
			if err != nil {
				return err
			}
			for _, alias := range []struct {
				set    bool
				policy string
			}{{onDemand, offers.SpotPolicyOnDemand}, {spotAuto, offers.SpotPolicyAuto}} {
				if !alias.set {
					continue
				}
				if f.SpotPolicy != "" && f.SpotPolicy != alias.policy {
					return fmt.Errorf("conflicting spot policies %q and %q", f.SpotPolicy, alias.policy)
				}
				f.SpotPolicy = alias.policy
			}
			if exportDir != "" && !cmd.Flags().Changed("limit") {
				f.Limit = 0 // an export takes every match unless told otherwise
			}
			q, err := f.Query()
			if err != nil {
				return err
			}
			cat, origin, err := loadOfferCatalog(cmd, catalogDir, catalogURL)
			if err != nil {
				return err
			}
			var hosts []offers.Provider
			total := cat.Count(q)
			if thisHost {
				o, err := local.ThisHost(cmd.Context(), "local", "")
				if err != nil {
					return fmt.Errorf("describe this host: %w", err)
				}
				hosts = append(hosts, staticOffers{name: "local", offers: []offers.Offer{o}})
				all := q
				all.Limit = 0
				total += len(offers.Filter([]offers.Offer{o}, all))
			}
			var live []offers.Provider
			if serverCfg != "" {
				if live, err = clusterOffers(cmd, serverCfg, q); err != nil {
					return err
				}
				for _, p := range live {
					// Live offers replace the catalog's rows of their
					// backend (Vast.ai's asks, not its catalog rows).
					cq := q
					cq.Backends = []string{p.Name()}
					total += len(p.(staticOffers).offers) - cat.Count(cq)
				}
			}
			m := offers.NewMarket(offers.MarketConfig{Catalog: cat, Hosts: hosts, Online: live,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
			limit := q.Limit
			if len(keys) > 0 {
				q.Limit = 0 // group over every match, then cut groups
			}
			ans := m.Query(cmd.Context(), q)
			if exportDir != "" {
				return exportCatalog(cmd, exportDir, cat, ans.Offers)
			}
			out := cmd.OutOrStdout()
			if len(keys) > 0 {
				groups := offers.GroupBy(ans.Offers, keys)
				if limit > 0 && len(groups) > limit {
					groups = groups[:limit]
				}
				if output == "json" {
					return writeJSON(out, groups)
				}
				printSnapshot(out, cat, origin)
				return printGroups(out, groups, keys)
			}
			if output == "json" {
				return writeJSON(out, offerJSON(ans.Offers))
			}
			printSnapshot(out, cat, origin)
			return printOffers(out, ans.Offers, total)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.GPU, "gpu", "", "GPU requirement in dstack's grammar (A100:80GB:8, 24GB..:2, nvidia:1..8, 0)")
	fl.StringVar(&f.CPU, "cpu", "", "vCPU requirement (8, 4..16, arm:8..)")
	fl.StringVar(&f.Memory, "memory", "", "RAM range (64GB.., 16GB..256GB)")
	fl.StringVar(&f.Disk, "disk", "", "disk range (100GB..)")
	fl.BoolVar(&f.Spot, "spot", false, "spot offers only (same as --spot-policy spot)")
	fl.StringVar(&f.SpotPolicy, "spot-policy", "", "spot, on-demand (default) or auto (both)")
	fl.BoolVar(&onDemand, "on-demand", false, "on-demand offers only (the default; same as --spot-policy on-demand)")
	fl.BoolVar(&spotAuto, "spot-auto", false, "spot and on-demand offers (same as --spot-policy auto)")
	fl.Float64Var(&f.MaxPrice, "max-price", 0, "highest price per hour in USD (0 = no limit)")
	fl.StringSliceVarP(&f.Backends, "backend", "b", nil, "backends to include (repeatable or comma-separated)")
	fl.StringSliceVarP(&f.Regions, "region", "r", nil, "regions to include (repeatable or comma-separated)")
	fl.StringSliceVar(&f.InstanceTypes, "instance-type", nil, "instance types to include")
	fl.IntVar(&f.Limit, "limit", defaultOfferLimit, "maximum offers (or groups) to show; 0 shows all")
	fl.StringVar(&catalogDir, "catalog-dir", "", "directory of gpuhunt PROVIDER.csv catalogs replacing the built-in snapshot")
	fl.StringVar(&catalogURL, "catalog-url", "", "gpuhunt catalog layout to download first (e.g. "+offers.DefaultRemoteURL+")")
	fl.StringVar(&groupBy, "group-by", "", "aggregate by gpu, backend and/or region (comma-separated)")
	fl.StringVarP(&output, "output", "o", "text", "output format: text or json")
	fl.BoolVar(&thisHost, "local", false, "include this machine as a local-backend offer")
	fl.StringVar(&serverCfg, "config", "", "server config file: include the live offers of its backends whose offers are not catalog rows (kubernetes: slices of the clusters' nodes; vultr: its plans; runpod, vastai: their stock)")
	fl.StringVar(&exportDir, "export-dir", "", "write the matching offers as gpuhunt BACKEND.csv files (usable as --catalog-dir) instead of listing them")
	return cmd
}

// staticOffers is a Provider of fixed offers (this host, for --local; a
// cluster's, for --config).
type staticOffers struct {
	name   string
	offers []offers.Offer
}

// Name implements offers.Provider.
func (s staticOffers) Name() string { return s.name }

// Offers implements offers.Provider: every offer, unfiltered (the Market
// filters).
func (s staticOffers) Offers(context.Context, offers.Query) ([]offers.Offer, error) {
	return s.offers, nil
}

// clusterOffers asks every backend of the server config at path whose
// offers are live (its driver's OfferSource in the registry) for its offers
// matching q (without q's limit), each as a staticOffers. A backend that
// does not answer is a warning.
func clusterOffers(cmd *cobra.Command, path string, q offers.Query) ([]offers.Provider, error) {
	cfg, err := loadServerConfig(path)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	q.Limit = 0
	var out []offers.Provider
	reg := registry()
	for _, e := range cfg.Backends {
		raw, err := json.Marshal(e.Options)
		if err != nil {
			return nil, err
		}
		src, ok, err := reg.LiveOffers(backends.Config{Name: e.Name, Type: e.Type, Options: raw}, log)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), offers.DefaultProviderTimeout)
		list, err := src.Offers(ctx, q)
		cancel()
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: backend %s: %v\n", src.Name(), err)
			continue
		}
		out = append(out, staticOffers{name: src.Name(), offers: list})
	}
	return out, nil
}

// loadOfferCatalog returns the catalog to query and a word on where it came from.
func loadOfferCatalog(cmd *cobra.Command, dir, url string) (*offers.Catalog, string, error) {
	var base *offers.Catalog
	var origin string
	var err error
	if dir != "" {
		base, err = offers.LoadDir(dir)
		origin = dir
	} else {
		base, err = offers.Embedded()
		origin = "built-in snapshot"
	}
	if err != nil {
		return nil, "", err
	}
	for _, s := range base.Sources() {
		if s.Skipped > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: skipped %d malformed rows\n", s.Origin, s.Skipped)
		}
	}
	if url == "" {
		return base, origin, nil
	}
	r, err := offers.NewRemote(offers.RemoteConfig{URL: url, Base: base,
		Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, "", err
	}
	if err := r.Refresh(cmd.Context()); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: some catalogs could not be downloaded, using %s for them: %v\n", origin, err)
	}
	return r.Catalog(), url + " over " + origin, nil
}

// exportCatalog writes offers as one gpuhunt CSV per backend plus a
// VERSION file carrying the catalog's snapshot date.
func exportCatalog(cmd *cobra.Command, dir string, cat *offers.Catalog, list []offers.Offer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	byBackend := map[string][]offers.Offer{}
	for _, o := range list {
		byBackend[o.Backend] = append(byBackend[o.Backend], o)
	}
	for backend, rows := range byBackend {
		if err := writeCatalogFile(filepath.Join(dir, backend+".csv"), rows); err != nil {
			return err
		}
	}
	if d := cat.SnapshotDate(); d != "" {
		v := strings.ReplaceAll(d, "-", "") + "-0\n"
		if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(v), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Wrote %d offers of %d backends to %s\n", len(list), len(byBackend), dir)
	return nil
}

func writeCatalogFile(path string, rows []offers.Offer) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := offers.WriteCSV(f, rows, nil); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// jsonOffer is one offer as `hoist offers --output json` prints it: a
// fixed set of keys, whatever else offers.Offer carries.
type jsonOffer struct {
	Backend      string  `json:"backend"`
	Instance     string  `json:"instance"`
	Region       string  `json:"region"`
	Price        float64 `json:"price"`
	Spot         bool    `json:"spot"`
	CPUs         int     `json:"cpus"`
	MemoryGB     float64 `json:"memory_gb"`
	GPUVendor    string  `json:"gpu_vendor"`
	GPUName      string  `json:"gpu_name"`
	GPUCount     int     `json:"gpu_count"`
	GPUMemoryGB  float64 `json:"gpu_memory_gb"`
	DiskGB       float64 `json:"disk_gb"`
	Availability string  `json:"availability"`
}

func offerJSON(list []offers.Offer) []jsonOffer {
	out := make([]jsonOffer, len(list))
	for i, o := range list {
		out[i] = jsonOffer{o.Backend, o.Instance, o.Region, o.Price, o.Spot, o.CPUs, o.MemoryGB,
			o.GPUVendor, o.GPUName, o.GPUCount, o.GPUMemoryGB, o.DiskGB, o.Availability}
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSnapshot(w io.Writer, c *offers.Catalog, origin string) {
	date := c.SnapshotDate()
	if date == "" {
		date = "unknown date"
	}
	fmt.Fprintf(w, "Catalog: %s, prices as of %s (not live).\n", origin, date)
	if u := c.UnknownGPUs(); len(u) > 0 {
		var names []string
		for n, k := range u {
			names = append(names, fmt.Sprintf("%s (%d)", n, k))
		}
		fmt.Fprintf(w, "GPUs not in hoist's table (offers kept): %s\n", strings.Join(names, ", "))
	}
	fmt.Fprintln(w)
}

// resources renders an offer's resources the way dstack's offer table does.
func resources(o offers.Offer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu=%d mem=%sGB", o.CPUs, num(o.MemoryGB))
	if o.CPUArch == offers.ArchARM {
		b.WriteString(" arm")
	}
	if o.GPUCount > 0 {
		fmt.Fprintf(&b, " gpu=%s:%sGB:%d", o.GPUName, num(o.GPUMemoryGB), o.GPUCount)
	}
	if o.DiskGB > 0 {
		fmt.Fprintf(&b, " disk=%sGB", num(o.DiskGB))
	}
	return b.String()
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func printOffers(w io.Writer, list []offers.Offer, total int) error {
	if len(list) == 0 {
		fmt.Fprintln(w, "No offers match.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tBACKEND\tREGION\tINSTANCE TYPE\tRESOURCES\tSPOT\tPRICE")
	maxPrice := 0.0
	for i, o := range list {
		spot := "no"
		if o.Spot {
			spot = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t$%s\n", i+1, o.Backend, o.Region, o.Instance, resources(o), spot, num(o.Price))
		maxPrice = max(maxPrice, o.Price)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nShown %d of %d offers, $%s max\n", len(list), max(total, len(list)), num(maxPrice))
	return nil
}

func printGroups(w io.Writer, groups []offers.Group, keys []string) error {
	if len(groups) == 0 {
		fmt.Fprintln(w, "No offers match.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var head []string
	for _, k := range keys {
		head = append(head, strings.ToUpper(k))
	}
	head = append(head, "BACKENDS", "REGIONS", "SPOT", "PRICE", "OFFERS")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, g := range groups {
		var row []string
		for _, k := range keys {
			switch k {
			case "gpu":
				row = append(row, g.GPU)
			case "backend":
				row = append(row, g.Backend)
			case "region":
				row = append(row, g.Region)
			}
		}
		spot := "on-demand"
		switch {
		case g.Spot && g.OnDemand:
			spot = "both"
		case g.Spot:
			spot = "spot"
		}
		price := "$" + num(g.MinPrice)
		if g.MaxPrice != g.MinPrice {
			price += "..$" + num(g.MaxPrice)
		}
		row = append(row, strings.Join(g.Backends, ","), strconv.Itoa(g.Regions), spot, price, strconv.Itoa(g.Count))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}
