package main

import (
	"fmt"
	"net/url"
	"strings"
)

// ideConfig is the `ide:` section: for each IDE whose server hoist
// installs into a dev environment that pins its `version`, the URL
// template of the server's tar.gz, for a mirror (dstack's URLs when
// absent). {version}, {commit} (windsurf's part of version@commit after
// the "@"; the version for the others) and {arch} (x64 or arm64) are
// replaced, as in dstack's URLs.
type ideConfig struct {
	VSCode   *ideServerConfig `yaml:"vscode"`
	Cursor   *ideServerConfig `yaml:"cursor"`
	Windsurf *ideServerConfig `yaml:"windsurf"`
}

// ideServerConfig is one IDE's entry of the `ide:` section.
type ideServerConfig struct {
	DownloadURL string `yaml:"download_url"`
}

// downloadURLs checks the `ide:` section and returns its URL templates by
// IDE, for reconciler.Config.IDEDownloadURLs.
func (c ideConfig) downloadURLs() (map[string]string, error) {
	out := map[string]string{}
	placeholders := strings.NewReplacer("{version}", "v", "{commit}", "c", "{arch}", "x64")
	for name, e := range map[string]*ideServerConfig{"vscode": c.VSCode, "cursor": c.Cursor, "windsurf": c.Windsurf} {
		if e == nil {
			continue
		}
		u, err := url.Parse(placeholders.Replace(e.DownloadURL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("ide.%s.download_url %q: want an http or https URL", name, e.DownloadURL)
		}
		out[name] = e.DownloadURL
	}
	return out, nil
}
