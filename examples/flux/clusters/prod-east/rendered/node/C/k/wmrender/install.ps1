# Rendered by wmrender: applies the node bundle on a Windows node. Idempotent: run it any number of times.
# sync runs it after pushing the bundle, with the bundle files that changed; it prints one JSON line and exits
# non-zero on failure. Edit the inputs, not this file.
[CmdletBinding()]
param(
    # Node paths of the bundle files that changed in this sync: the services that use them restart.
    [string[]]$ChangedFiles = @()
)

$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'

$result = [ordered]@{
    created        = @()
    updated        = @()
    restarted      = @()
    started        = @()
    rebootRequired = $false
    missing        = @()
    errors         = @()
}

function Write-Result {
    param([int]$Code)
    Write-Output ($result | ConvertTo-Json -Compress -Depth 4)
    exit $Code
}

function Get-NodeVariables {
    $route = Get-NetRoute -DestinationPrefix '0.0.0.0/0' | Sort-Object -Property RouteMetric | Select-Object -First 1
    $nodeIp = (Get-NetIPAddress -AddressFamily IPv4 -InterfaceIndex $route.ifIndex | Select-Object -First 1).IPAddress
    # The EC2 host name, through IMDSv1 (the MachineSets allow it).
    $hostnameOverride = [string](Invoke-RestMethod -UseBasicParsing -Uri 'http://169.254.169.254/latest/meta-data/local-hostname')
    $nodeName = $env:COMPUTERNAME
    if ($hostnameOverride) {
        $nodeName = $hostnameOverride
    }
    return @{
        NODE_IP           = $nodeIp
        HOSTNAME_OVERRIDE = $hostnameOverride.Trim().ToLowerInvariant()
        NODE_NAME         = $nodeName.Trim().ToLowerInvariant()
    }
}

try {
    # Directories.
    foreach ($dir in @('C:\k', 'C:\k\cni', 'C:\k\cni\config', 'C:\k\containerd', 'C:\k\containerd\registries', 'C:\k\etc\kubernetes\manifests', 'C:\k\tls', 'C:\k\tls\certs', 'C:\k\wmrender', 'C:\var\log', 'C:\var\log\containerd', 'C:\var\log\csi-proxy', 'C:\var\log\hybrid-overlay', 'C:\var\log\kube-proxy', 'C:\var\log\kubelet', 'C:\var\log\windows_exporter')) {
        if (-not (Test-Path -LiteralPath $dir)) {
            New-Item -ItemType Directory -Path $dir -Force | Out-Null
        }
    }

    # The Containers feature; installing it needs a reboot, which is reported, not done.
    $feature = Get-WindowsOptionalFeature -Online -FeatureName Containers
    if ($feature.State -ne 'Enabled') {
        Enable-WindowsOptionalFeature -Online -FeatureName Containers -All -NoRestart | Out-Null
        $result.rebootRequired = $true
        # containerd cannot run before the reboot; the next run after it configures the services.
        Write-Result 0
    }

    # Cluster-wide proxy as machine-level variables, exactly as given (commas stay commas). An empty value
    # removes the variable. Services see a change only after a reboot.
    $proxy = [ordered]@{
        HTTP_PROXY  = ''
        HTTPS_PROXY = ''
        NO_PROXY    = ''
    }
    foreach ($name in $proxy.Keys) {
        $want = $proxy[$name]
        $have = [Environment]::GetEnvironmentVariable($name, 'Machine')
        if ($want -eq '') {
            if ($null -ne $have) {
                [Environment]::SetEnvironmentVariable($name, $null, 'Machine')
                $result.rebootRequired = $true
            }
        }
        elseif ($have -cne $want) {
            [Environment]::SetEnvironmentVariable($name, $want, 'Machine')
            $result.rebootRequired = $true
        }
    }

    # Firewall: kubelet (logs, exec) and windows_exporter (metrics).
    $rules = @(
        @{ Name = 'ContainerLogsPort'; Port = 10250 },
        @{ Name = 'WindowsExporter'; Port = 9182 }
    )
    foreach ($rule in $rules) {
        if (-not (Get-NetFirewallRule -Name $rule.Name -ErrorAction SilentlyContinue)) {
            New-NetFirewallRule -Name $rule.Name -DisplayName $rule.Name -Direction Inbound -Protocol TCP `
                -LocalPort $rule.Port -Action Allow -EdgeTraversalPolicy Allow | Out-Null
        }
    }

    # Windows Defender must not scan what containerd runs.
    & 'C:\k\wmrender\windows-defender-exclusion.ps1' -BinPath 'C:\k\containerd\containerd.exe'

    # AWS: the instance metadata route is lost on reboot; a start-up task restores it (AWS's documented fix).
    $taskName = 'wmrender-aws-metadata-route'
    if (-not (Get-ScheduledTask -TaskName $taskName -ErrorAction SilentlyContinue)) {
        $action = New-ScheduledTaskAction -Execute 'powershell.exe' `
            -Argument ('-NoProfile -NonInteractive -ExecutionPolicy Bypass -File ' + 'C:\k\wmrender\aws-metadata-route.ps1')
        $trigger = New-ScheduledTaskTrigger -AtStartup
        Register-ScheduledTask -TaskName $taskName -Action $action -Trigger $trigger -User 'SYSTEM' -RunLevel Highest | Out-Null
    }
    & 'C:\k\wmrender\aws-metadata-route.ps1'

    # Every binary and credential the services need must be here before anything is (re)configured.
    $spec = Get-Content -Raw -LiteralPath 'C:\k\wmrender\services.json' | ConvertFrom-Json
    foreach ($svc in $spec.services) {
        foreach ($file in @($svc.binaries) + @($svc.secrets)) {
            if (-not (Test-Path -LiteralPath $file)) {
                $result.missing += $file
            }
        }
    }
    if ($result.missing.Count -gt 0) {
        throw ('missing files: ' + ($result.missing -join ', '))
    }

    $vars = Get-NodeVariables
    $restart = @{}
    foreach ($svc in $spec.services) {
        $command = $svc.command
        foreach ($name in @($svc.nodeVariables)) {
            $command = $command.Replace($name, $vars[$name])
        }
        $deps = @($svc.dependencies)
        $existing = Get-CimInstance -ClassName Win32_Service -Filter ("Name='" + $svc.name + "'")
        if (-not $existing) {
            $params = @{
                Name           = $svc.name
                BinaryPathName = $command
                DisplayName    = $svc.name
                Description    = $svc.description
                StartupType    = 'Automatic'
            }
            if ($deps.Count -gt 0) {
                $params.DependsOn = $deps
            }
            New-Service @params | Out-Null
            $result.created += $svc.name
            continue
        }
        $haveDeps = @((Get-Service -Name $svc.name).ServicesDependedOn | ForEach-Object { $_.Name } | Sort-Object)
        $wantDeps = @($deps | Sort-Object)
        $depsDiffer = ($haveDeps -join ',') -ne ($wantDeps -join ',')
        if ($existing.PathName -ne $command -or $existing.Description -ne $svc.description -or $depsDiffer) {
            if ($existing.State -eq 'Running') {
                Stop-Service -Name $svc.name -Force
            }
            $change = @{ PathName = $command; ServiceDependencies = [string[]]$wantDeps }
            $answer = Invoke-CimMethod -InputObject $existing -MethodName Change -Arguments $change
            if ($answer.ReturnValue -ne 0) {
                throw ('updating service ' + $svc.name + ' failed with code ' + $answer.ReturnValue)
            }
            Set-Service -Name $svc.name -Description $svc.description -StartupType Automatic
            $result.updated += $svc.name
            $restart[$svc.name] = $true
        }
        foreach ($file in @($svc.files)) {
            if ($ChangedFiles -contains $file) {
                $restart[$svc.name] = $true
            }
        }
    }

    # Start (or restart) in dependency order: the file lists the services in that order.
    foreach ($svc in $spec.services) {
        if ($svc.preStart) {
            & $svc.preStart -NodeName $vars.NODE_NAME
        }
        $service = Get-Service -Name $svc.name
        if ($service.Status -eq 'Running') {
            if ($restart.ContainsKey($svc.name)) {
                Restart-Service -Name $svc.name -Force
                $result.restarted += $svc.name
            }
        }
        else {
            Start-Service -Name $svc.name
            $result.started += $svc.name
        }
    }
}
catch {
    $result.errors += $_.Exception.Message
    Write-Result 1
}
Write-Result 0
