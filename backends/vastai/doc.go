// Package vastai is hoist's Vast.ai driver: a podcloud.Provider over
// Vast.ai's REST API (https://console.vast.ai/api/v0, Bearer API key;
// https://docs.vast.ai/api-reference), written after dstack's
// src/dstack/_internal/core/backends/vastai/{compute,api_client}.py and the
// vast-python CLI (vast.py).
//
// Offers are Vast.ai's asks, searched live (POST /bundles/) with dstack's
// filters and the query's requirements, and cached per distinct search for
// three minutes; an offer's Instance is the ask id, its Region the host's
// geolocation, and an ask with a min_bid has a spot (bid) variant at that
// price. A pod is one Vast.ai instance rented on an ask (PUT /asks/<id>/),
// running the job's image with the engine's command as its arguments
// (runtype "args") and port 10022 published; the server reaches it at
// public_ipaddr and the host port Vast.ai mapped.
//
// Vast.ai instances carry one free-form string, the label, so the driver
// keeps the pod's name and its tags there (see encodeLabel).
package vastai
