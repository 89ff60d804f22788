"""The quotas job: namespace GPU ResourceQuotas reconciled from the policy, per cluster."""
