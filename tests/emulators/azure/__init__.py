"""Azure emulator: ARM REST on 127.0.0.1 for AKS agent pools, Microsoft.Quota and Compute VMs.

The SDK wiring (``AzureClients``, ``StaticTokenCredential``, ``AllowHttpPolicy``) lives in
:mod:`tests.emulators.azure.sdk`, imported on demand: the azure-mgmt packages take over a second to import
and every pytest run loads these fixtures.
"""

from tests.emulators.azure.emulator import ENDPOINT_ENV, AzureEmulator, start_azure_emulator

__all__ = ["ENDPOINT_ENV", "AzureEmulator", "start_azure_emulator"]
