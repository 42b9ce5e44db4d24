"""opsdk.runtime"""
