package schema

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/robfig/cron/v3"
)

// Resource is one validated, normalized spec.
type Resource struct {
	Kind Kind
	Name string
	// File is the slash path of the defining file relative to the loaded root.
	File string
	// Pos is where the resource is defined (the document or CUE field).
	Pos Position
	// Spec is *Task, *Service, *DevEnvironment, *Workflow, *Fleet, *Volume
	// or *Gateway, normalized with every default applied.
	Spec any
	// JSON is the canonical normalized JSON of Spec, with "type" first:
	// byte-identical for specs that mean the same.
	JSON []byte
	// doc is the source tree the resource was decoded from, for PosOf.
	doc *node
	// pending is set on a workflow whose provider is in another
	// repository until ResolveWorkflow reads it.
	pending *pendingWorkflow
}

// Desired is the desired state of one revision: every resource, ordered by
// namespace, kind and name.
type Desired struct {
	Resources []Resource
}

// Lookup returns the resource of kind k named name.
func (d *Desired) Lookup(k Kind, name string) (Resource, bool) {
	for _, r := range d.Resources {
		if r.Kind.Namespace() == k.Namespace() && r.Name == name {
			return r, true
		}
	}
	return Resource{}, false
}

// IsSpecFile reports whether a file name is loaded as a spec: *.dstack.yml,
// *.dstack.yaml, .dstack.yml (and .dstack.yaml) or *.cue; and, named by
// its slash path from the loaded root, ProvidersFile or WorkflowsFile.
func IsSpecFile(name string) bool {
	if isWorkflowFile(path.Clean(name)) {
		return true
	}
	base := path.Base(name)
	return strings.HasSuffix(base, ".dstack.yml") || strings.HasSuffix(base, ".dstack.yaml") ||
		base == ".dstack.yml" || base == ".dstack.yaml" || strings.HasSuffix(base, ".cue")
}

// Load reads every spec file under fsys (see IsSpecFile), validates each
// against its kind's CUE definition and the cross-document rules, and
// returns the desired state. When any spec is invalid the error is Errors
// holding every problem, sorted by position, and the Desired is nil.
func Load(fsys fs.FS) (*Desired, error) {
	return LoadContext(context.Background(), fsys)
}

// LoadContext is Load under ctx: when ctx is done the load stops and the
// error is an Errors naming the deadline at every file not fully checked.
// A CUE evaluation still running then is abandoned (CUE cannot be
// interrupted), holding one of a few evaluation slots until it ends; the
// same content is refused at once afterwards. Revisions over
// MaxRevisionFiles or MaxRevisionBytes are refused before any file is read.
func LoadContext(ctx context.Context, fsys fs.FS) (*Desired, error) {
	var files []string
	var total int64
	var errs Errors
	err := fs.WalkDir(fsys, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			if p != "." && (de.Name() == ".git" || de.Name() == "cue.mod") {
				return fs.SkipDir
			}
			return nil
		}
		if !IsSpecFile(p) || !de.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		if len(files) == MaxRevisionFiles+1 {
			errs = append(errs, &Error{Pos: Position{File: p, Line: 1, Column: 1},
				Msg: fmt.Sprintf("more than %d spec files in the revision, the limit", MaxRevisionFiles)})
		}
		if info, err := de.Info(); err == nil {
			total += info.Size()
			if total > MaxRevisionBytes && total-info.Size() <= MaxRevisionBytes {
				errs = append(errs, &Error{Pos: Position{File: p, Line: 1, Column: 1},
					Msg: fmt.Sprintf("spec files of the revision reach more than %s here, the limit", byteSize(MaxRevisionBytes))})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk specs: %w", err)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return LoadFilesContext(ctx, fsys, files)
}

// LoadFiles is Load restricted to the given slash paths inside fsys. CUE
// files of one directory and package are evaluated together, so they may
// share definitions and references.
func LoadFiles(fsys fs.FS, files []string) (*Desired, error) {
	return LoadFilesContext(context.Background(), fsys, files)
}

// LoadFilesContext is LoadFiles under ctx, like LoadContext.
func LoadFilesContext(ctx context.Context, fsys fs.FS, files []string) (*Desired, error) {
	files = sortedSet(files) // a file named twice is loaded once
	var wfFiles []string
	files = slices.DeleteFunc(files, func(f string) bool {
		if isWorkflowFile(path.Clean(f)) {
			wfFiles = append(wfFiles, path.Clean(f))
			return true
		}
		return false
	})
	units := workUnits(files)
	type result struct {
		res  []Resource
		wf   []cueDoc
		errs Errors
	}
	results := make([]result, len(units))
	workers := min(runtime.GOMAXPROCS(0), len(units))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := validators.Get().(*validator)
			defer func() {
				if v != nil {
					validators.Put(v)
				}
			}()
			for i := range next {
				u := units[i]
				if ctx.Err() != nil {
					results[i] = result{errs: Errors{deadlineError(ctx, u[0])}}
					continue
				}
				if v == nil {
					v = validators.Get().(*validator)
				}
				var res []Resource
				var wf []cueDoc
				var errs Errors
				if len(u) == 1 && !strings.HasSuffix(u[0], ".cue") {
					res, errs = loadFileCached(ctx, v, fsys, u[0])
				} else {
					var abandoned bool
					res, wf, errs, abandoned = v.loadCueContext(ctx, fsys, u)
					if abandoned {
						v = nil // still in use by the abandoned evaluation
					}
				}
				results[i] = result{res, wf, errs}
			}
		}()
	}
	for i := range units {
		next <- i
	}
	close(next)
	wg.Wait()

	n := 0
	for _, r := range results {
		n += len(r.res)
	}
	var all []Resource
	if n > 0 {
		all = make([]Resource, 0, n)
	}
	var wf []cueDoc
	var errs Errors
	for _, r := range results {
		all = append(all, r.res...)
		wf = append(wf, r.wf...)
		errs = append(errs, r.errs...)
	}
	if ctx.Err() == nil {
		v := validators.Get().(*validator)
		res, wfErrs := loadWorkflows(v, fsys, wfFiles, wf)
		validators.Put(v)
		all, errs = append(all, res...), append(errs, wfErrs...)
	} else {
		for _, f := range wfFiles {
			errs = append(errs, deadlineError(ctx, f))
		}
	}
	errs = append(errs, checkIdentities(all)...)
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	// Identities are unique here (checkIdentities passed), so any sort
	// gives the one order; the generic one moves these large structs
	// without reflection.
	slices.SortFunc(all, func(a, b Resource) int {
		if c := strings.Compare(a.Kind.Namespace(), b.Kind.Namespace()); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return &Desired{Resources: all}, nil
}

// deadlineError says a file was not (fully) validated because ctx ended.
func deadlineError(ctx context.Context, file string) *Error {
	why := "validation was cancelled"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "validation of the revision exceeded its deadline"
	}
	return &Error{Pos: Position{File: file, Line: 1, Column: 1}, Msg: why + " before this file was checked"}
}

// workUnits groups files into units of work: one YAML file each, and all
// CUE files of one directory together.
func workUnits(files []string) [][]string {
	var units [][]string
	cueDirs := map[string]int{}
	for _, f := range files {
		if !strings.HasSuffix(f, ".cue") {
			units = append(units, []string{f})
			continue
		}
		dir := path.Dir(f)
		if i, ok := cueDirs[dir]; ok {
			units[i] = append(units[i], f)
			continue
		}
		cueDirs[dir] = len(units)
		units = append(units, []string{f})
	}
	return units
}

// fileCache keeps the result of loading each YAML spec file by path and
// content hash, so that a revision changing one file re-validates that file
// only (the cross-file identity checks always run). Results are shared
// between loads: callers treat a Resource's Spec as read-only.
var fileCache = struct {
	sync.Mutex
	m map[fileKey]fileResult
}{m: map[fileKey]fileResult{}}

// fileCacheMax bounds the cache; it is emptied when full.
const fileCacheMax = 100_000

// A fileKey names one content of one file: by the id its file system
// gives the content (ContentIDFS) when it has one, else by its SHA-256.
type fileKey struct {
	path string
	id   string
	sum  [sha256.Size]byte
}

// A ContentIDFS is a file system that names each file's content without
// reading it, as a Git tree names each file's blob: two files with one id
// hold the same bytes. Load keys its per-file verdicts by these ids, so
// that after a one-file commit the unchanged files are neither read nor
// hashed.
type ContentIDFS interface {
	fs.FS
	// ContentID returns the id of the content of the regular file at the
	// slash path name, and false when it has none.
	ContentID(name string) (string, bool)
}

type fileResult struct {
	res  []Resource
	errs Errors
}

func loadFileCached(ctx context.Context, v *validator, fsys fs.FS, p string) ([]Resource, Errors) {
	var k fileKey
	if ids, ok := fsys.(ContentIDFS); ok {
		if id, ok := ids.ContentID(p); ok {
			k = fileKey{path: p, id: id}
			if res, errs, ok := cachedFile(k); ok {
				return res, errs
			}
		}
	}
	b, err := readSpec(fsys, p)
	if err != nil {
		return nil, Errors{err}
	}
	if k.id == "" {
		k = fileKey{path: p, sum: sha256.Sum256(b)}
		if res, errs, ok := cachedFile(k); ok {
			return res, errs
		}
	}
	res, errs := v.loadFile(ctx, p, b)
	if ctx.Err() != nil {
		return res, errs // cut short: not a verdict on the file
	}
	fileCache.Lock()
	if len(fileCache.m) >= fileCacheMax {
		clear(fileCache.m)
	}
	fileCache.m[k] = fileResult{slices.Clone(res), slices.Clone(errs)}
	fileCache.Unlock()
	return res, errs
}

// cachedFile returns the verdict kept for k, shared: LoadFilesContext
// only appends its elements to the revision's own slices.
func cachedFile(k fileKey) ([]Resource, Errors, bool) {
	fileCache.Lock()
	r, ok := fileCache.m[k]
	fileCache.Unlock()
	return r.res, r.errs, ok
}

// validators caches validators (each with a compiled schema) across
// loads; a validator is used by one goroutine at a time.
var validators = sync.Pool{New: func() any { return newValidator() }}

// checkIdentities reports invalid names and two resources sharing one
// identity, naming both files.
func checkIdentities(all []Resource) Errors {
	var errs Errors
	type key struct{ ns, name string }
	first := map[key]Resource{}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := &all[i], &all[j]
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos.Column, b.Pos.Column)
	})
	for _, i := range order {
		r := all[i]
		k := key{r.Kind.Namespace(), r.Name}
		if prev, ok := first[k]; ok {
			what := string(r.Kind)
			if r.Kind.IsRun() {
				what = "run"
			}
			errs = append(errs, &Error{Pos: r.Pos, Path: "name",
				Msg: fmt.Sprintf("name: duplicate %s name %q: also defined at %s", what, r.Name, prev.Pos)})
			continue
		}
		first[k] = r
	}
	return errs
}

// nameFromFile derives a missing name: train.dstack.yml → train,
// .dstack.yml → its directory's name, x.cue field → the field label.
func nameFromFile(file string) string {
	base := path.Base(file)
	for _, suf := range []string{".dstack.yml", ".dstack.yaml", ".yml", ".yaml"} {
		if strings.HasSuffix(base, suf) {
			base = strings.TrimSuffix(base, suf)
			break
		}
	}
	if base == "" || base == ".dstack" {
		base = path.Base(path.Dir(file))
		if base == "." || base == "/" {
			return ""
		}
	}
	return sanitizeName(base)
}

// derivedName makes a valid name for a spec without one: the sanitized
// file, directory or CUE label, prefixed with the kind when that alone is
// too short (dstack would pick a random name; ours must be stable).
func derivedName(kind Kind, base string) string {
	if ValidName(base) {
		return base
	}
	n := sanitizeName(string(kind) + "-" + base)
	return strings.TrimRight(n, "-")
}

// sanitizeName turns a file or directory name into a valid resource name:
// lowercase, other characters replaced by '-', at most 41 characters.
func sanitizeName(s string) string {
	if ValidName(s) {
		return s
	}
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.TrimLeft(string(b), "-0123456789")
	if len(out) > 41 {
		out = strings.TrimRight(out[:41], "-")
	}
	return out
}

// normalize decodes one document of a known kind. fallbackName is used
// when the document has no name.
func normalize(doc *node, kind Kind, fallbackName string) (string, any, []byte, Errors) {
	d := &dec{}
	var spec any
	var name *string
	if def := defNames[kind]; def != "" {
		d.object(doc, "", fieldsAt(def)...)
	}
	switch kind {
	case KindTask:
		t := d.task(doc)
		spec, name = t, &t.Name
	case KindService:
		s := d.service(doc)
		spec, name = s, &s.Name
	case KindDevEnvironment:
		e := d.devEnvironment(doc)
		spec, name = e, &e.Name
	case KindFleet:
		f := d.fleet(doc)
		spec, name = f, &f.Name
	case KindVolume:
		v := d.volume(doc)
		if v == nil {
			return "", nil, nil, d.errs
		}
		spec, name = v, &v.Name
	case KindGateway:
		g := d.gateway(doc)
		spec, name = g, &g.Name
	}
	if nn := doc.get("name"); !nn.isNull() {
		if nn.kind != nMap && nn.kind != nList && nn.kind != nBool && !ValidName(*name) {
			d.errf(nn, "name", "invalid name %q: must match ^[a-z][a-z0-9-]{1,40}$", *name)
		}
	} else {
		*name = derivedName(kind, fallbackName)
	}
	if len(d.errs) > 0 {
		return "", nil, nil, d.errs
	}
	return *name, spec, canonicalJSON(kind, spec), nil
}

// canonicalJSON renders spec with "type" first and no HTML escaping.
func canonicalJSON(kind Kind, spec any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(spec); err != nil {
		panic(fmt.Sprintf("schema: encode %s: %v", kind, err))
	}
	body := bytes.TrimSpace(buf.Bytes())
	out := make([]byte, 0, len(body)+32)
	out = append(out, `{"type":"`...)
	out = append(out, kind...)
	out = append(out, '"')
	if len(body) > 2 {
		out = append(out, ',')
	}
	out = append(out, body[1:]...)
	return out
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

func validateCron(expr string) error {
	if len(strings.Fields(expr)) != 5 {
		return fmt.Errorf("invalid cron expression %q: wrong number of fields (expected 5)", expr)
	}
	if _, err := cronParser.Parse(expr); err != nil {
		return fmt.Errorf("invalid cron expression %q: %v", expr, err)
	}
	return nil
}
