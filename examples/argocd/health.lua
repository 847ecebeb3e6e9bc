-- Argo CD health check for kvpilot.io/LLMDeployment.
-- Install under resource.customizations.health.kvpilot.io_LLMDeployment in argocd-cm (see README.md).
-- Healthy: Ready and the status describes the current generation.
-- Degraded: the spec is invalid, an apply failed, or the rollout passed its progress deadline.
-- Progressing: anything else (waiting for the operator, rolling out, scaling, replicas starting).
local hs = {}

local function condition(status, kind)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local status = obj.status
local generation = obj.metadata and obj.metadata.generation or 0
if status == nil or status.observedGeneration == nil or status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "waiting for kvpilot to act on generation " .. tostring(generation)
  return hs
end

local specValid = condition(status, "SpecValid")
local degraded = condition(status, "Degraded")
local ready = condition(status, "Ready")
local progressing = condition(status, "Progressing")

if specValid ~= nil and specValid.status == "False" then
  hs.status = "Degraded"
  hs.message = "invalid spec: " .. (specValid.message or specValid.reason or "")
  return hs
end
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = (degraded.reason or "Degraded") .. ": " .. (degraded.message or "")
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "ready"
  return hs
end
hs.status = "Progressing"
if progressing ~= nil and progressing.message ~= nil and progressing.message ~= "" then
  hs.message = progressing.message
elseif ready ~= nil then
  hs.message = ready.message or "replicas starting"
else
  hs.message = "replicas starting"
end
return hs
