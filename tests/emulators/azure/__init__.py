"""Azure emulator: ARM REST on 127.0.0.1 for AKS agent pools, Microsoft.Quota and Compute VMs."""

from tests.emulators.azure.emulator import ENDPOINT_ENV, AzureEmulator, start_azure_emulator
from tests.emulators.azure.sdk import AllowHttpPolicy, AzureClients, StaticTokenCredential, emulator_client_kwargs

__all__ = [
    "ENDPOINT_ENV",
    "AllowHttpPolicy",
    "AzureClients",
    "AzureEmulator",
    "StaticTokenCredential",
    "emulator_client_kwargs",
    "start_azure_emulator",
]
