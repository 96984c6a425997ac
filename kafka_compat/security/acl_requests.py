"""The ACL requests applied to an AclAuthorizer: DescribeAcls (29), CreateAcls (30) and DeleteAcls
(31), request -> response, as Kafka's DescribeAclsRequest/CreateAclsRequest/DeleteAclsRequest turn
their fields into bindings and filters and AclApis hands them to the authorizer. The handler that
checks the CLUSTER permission first (DESCRIBE for DescribeAcls, ALTER for the others) and runs
these off the event loop is Kafka's AclApis, kafka_compat.server.acl_apis.

Without an authorizer the answer is SECURITY_DISABLED. Version 0 knows only LITERAL patterns:
a v0 filter of ANY reads as LITERAL, anything else is UNSUPPORTED_VERSION.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.create_acls import CreateAclsResponse
from ..protocol.messages.delete_acls import DeleteAclsResponse
from ..protocol.messages.describe_acls import DescribeAclsResponse
from .acl import AclBindingFilter, PatternType, ResourcePattern, acl_binding, acl_binding_filter
from .authorizer import AclAuthorizer

V0_LITERAL_ONLY = "Version 0 only supports literal resource pattern types"


def _security_disabled(entry_class, count: int) -> list:
    return [entry_class(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.")
            for _ in range(count)]


def binding_filter(f, version: int) -> AclBindingFilter | str:
    """The AclBindingFilter of a DescribeAcls request or DeleteAcls filter, or why it is refused."""
    pattern_type = PatternType.from_code(f.pattern_type_filter)
    if version == 0:
        if pattern_type is PatternType.ANY:
            pattern_type = PatternType.LITERAL
        elif pattern_type is not PatternType.LITERAL:
            return V0_LITERAL_ONLY
    return acl_binding_filter(f.resource_type_filter, f.resource_name_filter, pattern_type, f.principal_filter,
                              f.host_filter, f.operation, f.permission_type)


def describe_acls(authorizer: AclAuthorizer | None, request, version: int) -> DescribeAclsResponse:
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker")
    acl_filter = binding_filter(request, version)
    if isinstance(acl_filter, str):
        return DescribeAclsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=acl_filter)
    if acl_filter.is_unknown:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                    error_message="DescribeAclsRequest contains UNKNOWN elements")
    resources: dict[ResourcePattern, list] = {}
    for pattern, entry in authorizer.acls(acl_filter):
        resources.setdefault(pattern, []).append(DescribeAclsResponse.AclDescription(
            principal=entry.principal, host=entry.host, operation=entry.operation,
            permission_type=entry.permission_type))
    return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=[
        DescribeAclsResponse.DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name,
                                                  pattern_type=p.pattern_type, acls=acls)
        for p, acls in resources.items()])


def create_acls(authorizer: AclAuthorizer | None, request, version: int) -> CreateAclsResponse:
    result = CreateAclsResponse.AclCreationResult
    if authorizer is None:
        return CreateAclsResponse(results=_security_disabled(result, len(request.creations)))
    bindings = []
    refused: dict[int, result] = {}
    for i, c in enumerate(request.creations):
        if version == 0 and c.resource_pattern_type != PatternType.LITERAL:
            refused[i] = result(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=V0_LITERAL_ONLY)
            continue
        bindings.append((i, acl_binding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                                        c.host, c.operation, c.permission_type)))
    outcomes = authorizer.create_acls(b for _, b in bindings)
    for (i, _), error in zip(bindings, outcomes):
        refused[i] = result(error_code=ErrorCode.NONE, error_message=None) if error is None else \
            result(error_code=error.code, error_message=error.message)
    return CreateAclsResponse(results=[refused[i] for i in range(len(request.creations))])


def delete_acls(authorizer: AclAuthorizer | None, request, version: int) -> DeleteAclsResponse:
    filter_result = DeleteAclsResponse.DeleteAclsFilterResult
    if authorizer is None:
        return DeleteAclsResponse(filter_results=_security_disabled(filter_result, len(request.filters)))
    filters = [binding_filter(f, version) for f in request.filters]
    valid = [f for f in filters if not isinstance(f, str)]
    outcomes = iter(authorizer.delete_acls(valid))
    out = []
    for f in filters:
        if isinstance(f, str):
            out.append(filter_result(error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=f))
            continue
        outcome = next(outcomes)
        if outcome.error is not None:
            out.append(filter_result(error_code=outcome.error.code, error_message=outcome.error.message))
            continue
        out.append(filter_result(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=ErrorCode.NONE if err is None else err.code, error_message=None if err is None else
                err.message, resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                operation=b.entry.operation, permission_type=b.entry.permission_type)
            for b, err in outcome.deleted]))
    return DeleteAclsResponse(filter_results=out)
