# Rendered by wmrender: the network step of wmrender-node. Completes the node's network configuration once
# hybrid-overlay-node has created the HNS network, as WMCO's network-conf.ps1 does. The agent runs it before
# kube-proxy starts and after every boot; it writes C:\k\cni\config\cni.conf and C:\k\kube-proxy.conf only when
# their content changes. Prints one JSON line: {"ok":true}, {"ok":false,"pending":…} while the network is not
# there yet (the agent retries), or {"ok":false,"error":…}. Edit the inputs, not this file.
param(
    # The node's name, computed by the agent (the platform's host name, or the DNS host name).
    [Parameter(Mandatory = $true)]
    [string]$NodeName
)
$ErrorActionPreference = 'Stop'

function Write-StepResult {
    param([hashtable]$Result, [int]$Code)
    Write-Output ($Result | ConvertTo-Json -Compress)
    exit $Code
}

trap {
    Write-StepResult @{ ok = $false; error = $_.Exception.Message } 1
}

$networkName = 'OVNKubernetesHybridOverlayNetwork'
Import-Module -DisableNameChecking 'C:\k\hns.psm1'

# hybrid-overlay creates the network from the node's k8s.ovn.org/hybrid-overlay-node-subnet annotation.
$network = $null
# It appears once kubelet has registered the node; the agent retries a pending step, so wait only briefly here.
for ($i = 0; $i -lt 10; $i++) {
    $network = Get-HnsNetwork | Where-Object { $_.Name -eq $networkName }
    if ($network) {
        break
    }
    Start-Sleep -Seconds 1
}
if (-not $network) {
    Write-StepResult @{ ok = $false; pending = ('waiting for hybrid-overlay-node to create the HNS network ' + $networkName) } 0
}
$nodeSubnet = [string]@($network.Subnets)[0].AddressPrefix
$providerAddress = [string]$network.ManagementIP

function Set-ContentIfChanged {
    param(
        [string]$Path,
        [string]$Content
    )
    if (Test-Path -LiteralPath $Path) {
        $current = (Get-Content -Raw -LiteralPath $Path) -replace "`r", ''
        if ($current -ceq $Content) {
            return
        }
    }
    Set-Content -LiteralPath $Path -Value $Content -NoNewline -Encoding ascii
}

$cni = @'
{
  "cniVersion": "0.2.0",
  "name": "OVNKubernetesHybridOverlayNetwork",
  "type": "win-overlay",
  "apiVersion": 2,
  "capabilities": {
    "dns": true,
    "portMappings": true
  },
  "ipam": {
    "type": "host-local",
    "subnet": "__NODE_SUBNET__"
  },
  "policies": [
    {
      "name": "EndpointPolicy",
      "value": {
        "settings": {
          "destinationPrefix": "",
          "exceptionList": [
            "172.30.0.0/16"
          ],
          "needEncap": false
        },
        "type": "OutBoundNAT"
      }
    },
    {
      "name": "EndpointPolicy",
      "value": {
        "settings": {
          "destinationPrefix": "172.30.0.0/16",
          "exceptionList": [],
          "needEncap": true
        },
        "type": "SDNRoute"
      }
    },
    {
      "name": "EndpointPolicy",
      "value": {
        "settings": {
          "providerAddress": "__PROVIDER_ADDRESS__"
        },
        "type": "ProviderAddress"
      }
    }
  ]
}
'@
$cni = $cni.Replace('__NODE_SUBNET__', $nodeSubnet).Replace('__PROVIDER_ADDRESS__', $providerAddress)
Set-ContentIfChanged -Path 'C:\k\cni\config\cni.conf' -Content ($cni -replace "`r", '')

# The VIP endpoint is kube-proxy's source address for load-balanced traffic.
$endpoint = Invoke-HNSRequest GET endpoints | Where-Object { $_.Name -eq 'VIPEndpoint' }
if (-not $endpoint) {
    $endpoint = New-HnsEndpoint -NetworkId $network.ID -Name 'VIPEndpoint'
    Attach-HNSHostEndpoint -EndpointID $endpoint.ID -CompartmentID 1
}
$mac = ([string]$endpoint.MacAddress).Replace(':', '-')
$adapter = Get-NetIPConfiguration -AllCompartments -All -Detailed | Where-Object { $_.NetAdapter.LinkLayerAddress -eq $mac }
$sourceVip = [string]@($adapter.IPv4Address)[0].IPAddress
if (-not $sourceVip) {
    throw 'cannot find the IPv4 address of the VIP endpoint'
}

$kubeProxy = @'
kind: KubeProxyConfiguration
apiVersion: kubeproxy.config.k8s.io/v1alpha1
clientConnection:
  kubeconfig: C:\k\kubeconfig
hostnameOverride: __NODE_NAME__
mode: kernelspace
winkernel:
  networkName: OVNKubernetesHybridOverlayNetwork
  sourceVip: __SOURCE_VIP__
  enableDSR: true
clusterCIDR: __NODE_SUBNET__
'@
$kubeProxy = $kubeProxy.Replace('__NODE_NAME__', $NodeName).Replace('__NODE_SUBNET__', $nodeSubnet).Replace('__SOURCE_VIP__', $sourceVip)
Set-ContentIfChanged -Path 'C:\k\kube-proxy.conf' -Content ($kubeProxy -replace "`r", '')
Write-StepResult @{ ok = $true } 0
