// Package arm simulates Azure for the cloud simulator (e2e/cloudsim): the
// Microsoft Entra ID (Azure AD) token endpoint azidentity's
// ClientSecretCredential talks to, and enough of Azure Resource Manager for
// azure-sdk-for-go's armcompute/v7 and armnetwork/v9 clients to work
// unmodified with only the cloud configuration pointed at it: virtual
// machines (long-running operations, instance view, spot eviction), managed
// disks attached through the VM's storageProfile.dataDisks, resource groups,
// and the network resources a VM needs (virtual networks, network security
// groups, the network interface and public IP address a VM's
// networkInterfaceConfigurations create).
//
// Wire formats follow the public REST reference
// (https://learn.microsoft.com/rest/api/compute/virtual-machines,
// https://learn.microsoft.com/rest/api/compute/disks,
// https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations)
// and the OAuth 2.0 client credentials flow of the Microsoft identity
// platform
// (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow).
// Every api-version is accepted.
//
// It is test support: the cloudsim command and e2e tests import it, nothing
// of the daemon does.
package arm
