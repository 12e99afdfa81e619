package aws

import (
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"hoist/backends"
)

// EC2 error codes (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
// by what they mean to hoist.
var (
	// capacityCodes: the offer cannot be had now; the next offer may. dstack
	// moves to the next zone and offer on every RunInstances client error
	// (src/dstack/_internal/core/backends/aws/compute.py, create_instance);
	// these are the ones that are about capacity or quota.
	capacityCodes = codes(
		"InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
		"InsufficientCapacity", "InsufficientAddressCapacity", "InsufficientFreeAddressesInSubnet",
		"InsufficientVolumeCapacity", "InstanceLimitExceeded", "VcpuLimitExceeded",
		"MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow", "Unsupported",
		"InvalidParameterValue", "InvalidParameterCombination", "UnsupportedOperation",
	)
	// notFoundCodes: the resource is gone or never existed.
	notFoundCodes = codes(
		"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed", "InvalidVolume.NotFound",
		"InvalidVolumeID.Malformed", "InvalidPlacementGroup.Unknown",
	)
	// stalledCodes: credentials, permissions or configuration the user must
	// fix; retrying without a change is pointless.
	stalledCodes = codes(
		"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch",
		"OptInRequired", "Blocked", "PendingVerification", "InvalidAMIID.NotFound",
		"InvalidAMIID.Malformed", "InvalidAMIID.Unavailable", "InvalidGroup.NotFound",
		"InvalidKeyPair.NotFound", "InvalidVpcID.NotFound", "IdempotentParameterMismatch",
		"InvalidVolume.ZoneMismatch", "InvalidIAMInstanceProfile.NotFound",
	)
	// transientCodes: throttling and service trouble.
	transientCodes = codes(
		"RequestLimitExceeded", "Throttling", "ThrottlingException", "InternalError",
		"InternalFailure", "ServiceUnavailable", "Unavailable", "RequestExpired",
	)
)

func codes(list ...string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, c := range list {
		m[c] = true
	}
	return m
}

// code returns the EC2 error code of err, "" when err is not an API error.
func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// classify classifies an EC2 error for callers that are not launching:
// ErrNotFound, stalled, or transient (the default, also for network
// errors).
func classify(err error) error {
	if err == nil {
		return nil
	}
	c := code(err)
	switch {
	case notFoundCodes[c]:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case stalledCodes[c]:
		return backends.Stalled(err)
	case c != "" && !transientCodes[c] && status(err) < 500:
		// Other client errors are mistakes of the request: retrying the
		// same request will not help.
		return backends.Stalled(err)
	}
	return backends.Transient(err)
}

// classifyLaunch classifies a RunInstances error: capacity and
// offer-specific client errors wrap ErrNoCapacity so that the next offer is
// tried; the rest as classify.
func classifyLaunch(err error) error {
	if err == nil {
		return nil
	}
	c := code(err)
	if capacityCodes[c] {
		return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
	}
	return classify(err)
}

// status returns the HTTP status of err's response, 0 when there was none.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
