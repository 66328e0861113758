"""The API's bodies as typed dictionaries: what a call sends and what it gets back.

Each is a ``TypedDict`` named after the schema's component (``/v1/schema/``), holding the
fields this client uses, under the API's own (camelCase) names; a response may carry more.
The envelope mirrors the reference's section 7 ("The envelope"). The test suite checks every
field here against the server's schema, so a field renamed or retyped there fails a test.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, NotRequired, Required, TypedDict, TypeVar

T = TypeVar("T")


class Page(TypedDict, Generic[T]):
    """One page of a list: ``results``, the total ``count`` and the links to its
    neighbours (null at either end)."""

    count: int
    next: str | None
    previous: str | None
    results: list[T]


# --- recall: the envelope ------------------------------------------------------------------


class Entry(TypedDict):
    """A memory that entered the context, in rank order."""

    id: str
    segmentKind: str
    memoryType: str
    sourceKind: str
    confirmationStatus: str
    confidence: float
    sensitivity: str
    content: str
    tokens: int
    similarity: float
    score: float
    createdAt: str


class TruncatedRef(TypedDict):
    """A memory that did not fit whole: its id and metadata, no content."""

    id: str
    segmentKind: str
    memoryType: str
    tokens: int


class KindBudget(TypedDict):
    reserved: int
    ceiling: int | None
    demand: int
    allocated: int
    used: int


class Budget(TypedDict):
    totalTokenBudget: int
    perKind: dict[str, KindBudget]
    usedTokens: int
    pressure: bool
    pinnedOverflow: bool


class Counts(TypedDict):
    """The recall's funnel."""

    candidates: int
    afterPolicy: int
    afterRanking: int
    afterBudgetAllocation: int


class Decision(TypedDict):
    id: str
    code: str
    segmentKind: NotRequired[str]
    tokens: NotRequired[int]
    similarity: NotRequired[float]
    score: NotRequired[float]


class Diagnostics(TypedDict):
    verbosity: str
    counts: Counts
    reasons: NotRequired[dict[str, int]]
    accessPath: NotRequired[str]
    warnings: NotRequired[list[str]]
    decisions: list[Decision]


class TokenCounts(TypedDict):
    entries: int
    truncatedRefs: int
    used: int
    budget: int
    query: int
    perKind: dict[str, int]


class Envelope(TypedDict):
    """What a recall returns: the memories that may enter the context, within the budget,
    recorded as one ``context.assembled`` event whose payload carries ``envelopeId`` and
    ``digest``."""

    envelopeId: str
    entries: list[Entry]
    truncatedRefs: list[TruncatedRef]
    budget: Budget
    diagnostics: Diagnostics
    effectivePolicyHash: str
    effectiveBudgetHash: str
    prefixFingerprint: str
    digest: str
    tokenCounts: TokenCounts
    reused: bool
    generatedAt: str


# --- memories --------------------------------------------------------------------------------

MemoryType = Literal[
    "fact", "preference", "decision", "instruction", "episode", "summary", "insight", "entity"
]
SourceKind = Literal["user", "assistant", "tool", "retrieval", "operator", "system", "import"]


class MemoryInput(TypedDict, total=False):
    """A memory to write: ``content``, ``memoryType`` and ``sourceKind``; the rest have
    defaults (reference, "Memories")."""

    content: Required[str]
    memoryType: Required[MemoryType]
    sourceKind: Required[SourceKind]
    confirmationStatus: str
    confidence: float
    sensitivity: str
    consentPolicy: str
    segmentKind: str
    isCurrent: bool
    expiresAt: str | None
    tier: str


class MemoryPatch(TypedDict, total=False):
    """The fields of a memory to change (editors)."""

    content: str
    memoryType: MemoryType
    sourceKind: SourceKind
    confirmationStatus: str
    confidence: float
    sensitivity: str
    consentPolicy: str
    segmentKind: str
    lifecycleStatus: str
    isCurrent: bool
    expiresAt: str | None
    tier: str


class Memory(TypedDict):
    id: str
    actorId: str
    content: str
    memoryType: str
    sourceKind: str
    confirmationStatus: str
    confidence: float
    sensitivity: str
    consentPolicy: str
    segmentKind: str
    lifecycleStatus: str
    tier: str
    isCurrent: bool
    supersededBy: str | None
    expiresAt: str | None
    staleSince: str | None
    createdAt: str
    updatedAt: str
    lastAccessedAt: str | None
    hitCount: int
    tokenCount: int
    embeddingModel: str
    embeddingPending: bool


class MemoryBatch(TypedDict):
    memories: list[Memory]
    count: int


class Injection(TypedDict):
    """An envelope that carried a memory."""

    eventId: int
    envelopeId: str | None
    occurredAt: str
    workloadId: str | None
    environment: str
    caller: str
    truncated: bool


class MemoryLifecycle(TypedDict):
    memoryId: str
    tier: str
    decayScore: float
    decays: bool
    staleAt: str | None
    promotion: Any
    settingsVersion: int
    embedded: bool


class Erasure(TypedDict):
    actorId: str
    erasedAt: str
    erasedBy: str
    count: int
    archiveLinesRemoved: int
    queriesRemoved: int
    sessionsRemoved: int
    turnsRemoved: int
    eventId: int | None
    alreadyErased: bool


# --- sessions and turns ------------------------------------------------------------------------


class Session(TypedDict):
    id: str
    externalId: str | None
    actorId: str
    workloadId: str
    environment: str
    status: Literal["active", "ended"]
    turnCount: int
    systemPromptTokens: int
    toolSchemaTokens: int
    lastBudgetStatus: dict[str, Any] | None
    author: str
    createdAt: str
    updatedAt: str
    endedAt: str | None
    links: dict[str, str]


class Message(TypedDict):
    """A turn's message: ``user``, ``assistant`` or ``tool``."""

    role: Literal["user", "assistant", "tool"]
    content: str


class ChatMessage(TypedDict):
    """A message of an assembled prompt (the chat-completions shape)."""

    role: str
    content: str


class Prompt(TypedDict):
    messages: list[ChatMessage]
    parts: Any


class TurnRecall(TypedDict):
    """The recall behind a turn's supporting context: its envelope's ids and digest, and its
    ``context.assembled`` event (``eventId``)."""

    envelopeId: str
    eventId: int
    digest: str
    counts: Counts
    memoryIds: list[str]
    truncatedIds: list[str]
    topK: int
    usedTokens: int
    tokenBudget: dict[str, Any]
    warnings: list[str]


class TurnAnswer(TypedDict):
    """What posting turns returns: the turns appended and, when the last message was the
    user's, the prompt to send with its diagnostics (null otherwise)."""

    sessionId: str
    appended: list[int]
    turn: int | None
    prompt: Prompt | None
    primed: bool | None
    layout: dict[str, Any] | None
    recall: TurnRecall | None
    budgetStatus: dict[str, Any] | None
    compaction: dict[str, Any] | None
    parts: Any
    links: dict[str, str] | None


class CompactionRun(TypedDict):
    """A compaction run of a session: its trigger, outcome, tokens before and after and
    what it did (turns summarised, summary memories, insights superseded, promotions)."""

    id: str
    sessionId: str
    trigger: Literal["automatic", "manual"]
    reason: str
    severity: str
    status: Literal["queued", "running", "succeeded", "failed"]
    outcome: str
    service: str
    serviceKind: str
    serviceLabel: str | None
    timeBudgetMs: int
    timeBudgetExhausted: bool
    durationMs: int | None
    targetUtilization: float
    targetMet: bool | None
    availableBudget: int | None
    tokensBefore: int | None
    tokensAfter: int | None
    utilizationBefore: float | None
    utilizationAfter: float | None
    turnsSummarised: list[int]
    summaryMemoryIds: list[str]
    insightsSuperseded: list[str]
    memoriesPromoted: list[str]
    notes: list[str]
    error: dict[str, Any] | None
    author: str
    createdAt: str
    startedAt: str | None
    finishedAt: str | None
    links: dict[str, str]


class TurnDetail(TypedDict):
    sessionId: str
    turn: int
    role: str
    tokens: int
    createdAt: str
    assembled: bool
    primed: bool | None
    layout: dict[str, Any] | None
    recall: TurnRecall | None
    budgetStatus: dict[str, Any] | None
    compaction: dict[str, Any] | None
    parts: Any
    links: dict[str, str] | None


class TurnPrompt(TypedDict):
    sessionId: str
    turn: int
    private: bool
    messages: list[ChatMessage]
    parts: Any


# --- policies ----------------------------------------------------------------------------------


class PolicyDocument(TypedDict, total=False):
    """A policy: one key per axis (reference, "Policy axes"). The floor names every axis; a
    workload policy or a recall's override names the axes it narrows."""

    memoryTypeAllowed: list[str]
    sourceKindAllowed: list[str]
    confirmationStatusAllowed: list[str]
    consentPolicyAllowed: list[str]
    confidenceMin: float
    sensitivityCeiling: str
    maxAgeSeconds: int | None
    similarityMin: float | None
    totalTokenBudget: int
    perSegmentCeiling: dict[str, int | None]
    perSegmentReservation: dict[str, int]
    forbiddenSegmentKinds: list[str]
    pinned: list[str]
    dropOrder: list[str]
    diagnosticsVerbosity: str


class WorkspacePolicy(TypedDict):
    """The operator floor at one version (its ETag is ``"<version>"``)."""

    version: int
    policy: PolicyDocument
    relaxableAxes: list[str]
    author: str
    comment: str
    createdAt: str


class WorkloadPolicy(TypedDict):
    """A workload's policy for one environment (null: all environments) at one version."""

    workloadId: str
    environment: str | None
    version: int
    policy: PolicyDocument
    author: str
    comment: str
    createdAt: str


class PolicyConflict(TypedDict):
    code: str
    axis: str
    kind: str | None
    workloadValue: Any
    floorValue: Any
    effectiveValue: Any
    message: str


class EffectivePolicy(TypedDict):
    workloadId: str
    environment: str | None
    policy: PolicyDocument
    relaxableAxes: list[str]
    effectivePolicyHash: str
    effectiveBudgetHash: str
    compliant: bool
    relaxingAxes: list[str]
    conflicts: list[PolicyConflict]
    floorVersion: int
    workloadPolicyVersion: int | None


class LayoutConfigVersion(TypedDict):
    workloadId: str
    version: int | None
    isDefault: bool
    config: dict[str, Any]
    author: str | None
    comment: str
    createdAt: str | None


# --- workspaces and workloads ------------------------------------------------------------------


class Workspace(TypedDict):
    slug: str
    name: str
    environments: list[str]
    storeQueries: bool
    recallRatePerMinute: int | None
    createdAt: str


class WorkspaceChanges(TypedDict, total=False):
    name: str
    storeQueries: bool
    recallRatePerMinute: int | None


class Workload(TypedDict):
    id: str
    workspace: str
    name: str
    description: str
    createdAt: str
    archivedAt: str | None


# --- audit ------------------------------------------------------------------------------------


class AuditEvent(TypedDict):
    id: int
    type: str
    occurredAt: str
    workspace: str
    author: str
    workloadId: str | None
    environment: str | None
    actorId: str | None
    payload: dict[str, Any]
    query: str | None
    prevHash: str
    hash: str
    lane: int


class ChainVerdict(TypedDict):
    ok: bool
    checked: int
    firstBrokenId: int | None
    reason: str


class ReplayedMemory(TypedDict):
    id: str
    change: Literal["entered", "left", "stayed"]
    then: str | None
    now: str | None
    reason: str
    words: str
    present: bool


class Replay(TypedDict):
    eventId: int
    envelopeId: str | None
    query: dict[str, Any]
    then: dict[str, Any]
    now: dict[str, Any]
    changedVersions: list[str]
    counts: dict[str, int]
    memories: list[ReplayedMemory]
    notes: list[str]


# --- maintenance ------------------------------------------------------------------------------

Sweep = Literal["expiry", "decay", "retention", "promotion", "dedup", "reembed", "sessions"]


class Run(TypedDict):
    """A maintenance run: a sweep's preview or execution."""

    id: int
    workspace: str
    sweep: str
    sweepSummary: str
    mode: Literal["preview", "execute"]
    status: str
    trigger: str
    preview: int | None
    settingsVersion: int
    embedder: str
    progress: dict[str, Any]
    counts: dict[str, Any]
    confirm: int | None
    error: dict[str, Any] | None
    author: str
    asOf: str | None
    createdAt: str
    startedAt: str | None
    finishedAt: str | None
    auditEventId: int | None
    revertedAt: str | None
    revertedBy: str
    revertAuditEventId: int | None
    links: dict[str, str]


class RunItem(TypedDict):
    memoryId: str | None
    sessionId: str | None
    actorId: str
    reason: str
    score: float | None
    details: Any
    outcome: str
    note: str
    before: Any
    after: Any
    revertOutcome: str
    revertReason: str


class RevertCounts(TypedDict):
    changed: int
    reverted: int
    skipped: int


class RevertSkip(TypedDict):
    memoryId: str
    reason: str
    message: str


class Revert(TypedDict):
    runId: int
    sweep: str
    mode: Literal["preview", "execute"]
    counts: RevertCounts
    fields: list[str]
    revertedIds: list[str]
    revertedIdsTruncated: bool
    skipped: list[RevertSkip]
    skippedTruncated: bool
    revertedAt: str | None
    revertedBy: str
    auditEventId: int | None
    links: dict[str, Any]


class Restore(TypedDict):
    restored: int
    alreadyPresent: int


class LifecycleSettings(TypedDict):
    version: int
    settings: dict[str, Any]
    comment: str
    author: str
    createdAt: str | None


# --- tokens and members -----------------------------------------------------------------------

TokenRole = Literal["operator", "editor", "viewer", "agent"]
MemberRole = Literal["operator", "editor", "viewer"]


class Token(TypedDict):
    id: int
    name: str
    role: TokenRole
    scopes: list[str]
    boundWorkloads: list[str]
    boundEnvironments: list[str]
    prefix: str
    status: Literal["active", "expired", "revoked"]
    createdAt: str
    lastUsedAt: str | None
    expiresAt: str | None
    revokedAt: str | None
    rotatedAt: str | None
    previousSecretValidUntil: str | None
    apiRatePerMinute: int | None
    recallRatePerMinute: int | None


class TokenSecret(Token):
    """A token as issued or rotated: with its ``secret``, shown this once."""

    secret: str


class Member(TypedDict):
    username: str
    role: MemberRole
